package docker

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// buildScript builds the kernel image from Debian packages with debootstrap and
// `docker import`, so no registry is needed. kernel-image/Dockerfile is the same image
// for machines that can pull debian:bookworm-slim.
//
//go:embed kernel-image/build.sh
var buildScript []byte

// BuildImage builds the kernel image called image (empty means [DefaultImage]) by
// running the embedded kernel-image/build.sh with bash, streaming its output to
// stdout and stderr. An image already built from the same recipe is reused unless
// force is set. The script needs root (debootstrap, chroot), debootstrap, the docker
// CLI and a Debian mirror in the machine's apt sources; it takes a few minutes.
func BuildImage(ctx context.Context, image string, force bool, stdout, stderr io.Writer) error {
	if image == "" {
		image = DefaultImage
	}
	f, err := os.CreateTemp("", "kernelbox-build-*.sh")
	if err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(buildScript); err != nil {
		f.Close()
		return fmt.Errorf("build image: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	args := []string{f.Name(), image}
	if force {
		args = append(args, "--force")
	}
	cmd := exec.CommandContext(ctx, "bash", args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build image %s: %w", image, err)
	}
	return nil
}

// ImageExists reports whether the Docker daemon named by the environment (DOCKER_HOST,
// else the local socket) has image (empty means [DefaultImage]).
func ImageExists(ctx context.Context, image string) (bool, error) {
	if image == "" {
		image = DefaultImage
	}
	c, err := newClient("")
	if err != nil {
		return false, err
	}
	defer c.Close()
	return imageExists(ctx, c, image)
}

// imageExists reports whether the daemon behind api has image.
func imageExists(ctx context.Context, api dockerAPI, image string) (bool, error) {
	_, err := api.ImageInspect(ctx, image)
	switch {
	case isNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("inspect image %s: %w", image, err)
	}
	return true, nil
}
