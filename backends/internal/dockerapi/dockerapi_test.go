package dockerapi

import (
	"errors"
	"fmt"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
)

func TestShort(t *testing.T) {
	for in, want := range map[string]string{"": "", "abc": "abc", "0123456789abcdef": "0123456789ab"} {
		if got := Short(in); got != want {
			t.Errorf("Short(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIsNotFound(t *testing.T) {
	if !IsNotFound(fmt.Errorf("inspect: %w", cerrdefs.ErrNotFound)) {
		t.Error("a wrapped not-found error is not seen")
	}
	if IsNotFound(errors.New("conflict")) {
		t.Error("another error is taken for not-found")
	}
}
