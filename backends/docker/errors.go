package docker

import (
	"errors"
	"fmt"
	"strings"
)

// ErrClosed is returned by [Backend.Open] after [Backend.Close] has been called.
var ErrClosed = errors.New("docker backend is closed")

// ErrNoImage means the kernel image is not present in the Docker daemon. Errors that
// wrap it say how to build the image.
var ErrNoImage = errors.New("kernel image not found")

// noImageError wraps ErrNoImage with the image name and how to build it.
func noImageError(image string) error {
	return fmt.Errorf("%w: %s is not in the Docker daemon; build it with `kernelbox image build` "+
		"or `bash backends/docker/kernel-image/build.sh %s` (no registry needed)", ErrNoImage, image, image)
}

// StartError is returned by [Backend.Open] when a container was created but its
// Jupyter server did not become ready. The container has been removed by the time the
// error is returned; the fields keep what it said before it went.
type StartError struct {
	// Container is the container's name.
	Container string
	// Err is the cause: a timeout, the container exiting, or an API failure.
	Err error
	// Running reports whether the container was still running when Open gave up.
	Running bool
	// ExitCode is the container's exit code when it was not running.
	ExitCode int
	// OOMKilled reports Docker's OOM flag for the container.
	OOMKilled bool
	// Logs holds the container's last log lines (stdout and stderr interleaved).
	Logs []string
}

// Error describes the failure with the container's state and its last log lines.
func (e *StartError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "start container %s: %v", e.Container, e.Err)
	switch {
	case e.Running:
		b.WriteString(" (container still running)")
	default:
		fmt.Fprintf(&b, " (container exited with code %d", e.ExitCode)
		if e.OOMKilled {
			b.WriteString(", OOM-killed")
		}
		b.WriteString(")")
	}
	if len(e.Logs) == 0 {
		b.WriteString("; no container logs")
		return b.String()
	}
	b.WriteString("; last container log lines:")
	for _, l := range e.Logs {
		b.WriteString("\n    ")
		b.WriteString(l)
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *StartError) Unwrap() error { return e.Err }
