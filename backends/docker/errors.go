package docker

import (
	"errors"
	"fmt"

	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
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
// Jupyter server did not become ready (Kind "container"). The container has been
// removed by the time the error is returned; the fields keep what it said before
// it went: Name, Err, Running, ExitCode, OOMKilled and Logs.
type StartError = sandbox.StartError
