package docker

import (
	"errors"
	"strings"
	"testing"

	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
)

func TestStartErrorMessage(t *testing.T) {
	t.Parallel()
	cause := errors.New("boom")
	tests := []struct {
		name string
		e    StartError
		want []string
	}{
		{"exited with logs", StartError{Kind: sandbox.KindContainer, Name: "kernelbox-1", Err: cause, ExitCode: 137, OOMKilled: true, Logs: []string{"a", "b"}},
			[]string{"start container kernelbox-1: boom", "exited with code 137, OOM-killed", "\n    a\n    b"}},
		{"running without logs", StartError{Kind: sandbox.KindContainer, Name: "kernelbox-2", Err: cause, Running: true},
			[]string{"still running", "no container logs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msg := tt.e.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
			if !errors.Is(&tt.e, cause) {
				t.Error("StartError does not unwrap to its cause")
			}
		})
	}
	if err := noImageError("img"); !errors.Is(err, ErrNoImage) || !strings.Contains(err.Error(), "build.sh img") {
		t.Errorf("noImageError = %v", err)
	}
}
