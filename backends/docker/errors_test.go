package docker

import (
	"errors"
	"strings"
	"testing"
)

// StartError's message is tested where it lives (backends/internal/sandbox).

func TestNoImageError(t *testing.T) {
	t.Parallel()
	if err := noImageError("img"); !errors.Is(err, ErrNoImage) || !strings.Contains(err.Error(), "build.sh img") {
		t.Errorf("noImageError = %v", err)
	}
}
