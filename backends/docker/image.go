package docker

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
)

// buildScript builds the kernel image from Debian packages with debootstrap and
// `docker import`, so no registry is needed. kernel-image/Dockerfile is the same image
// for machines that can pull debian:bookworm-slim.
//
//go:embed kernel-image/build.sh
var buildScript []byte

// buildRScript builds the R kernel image on top of the kernel image; see
// kernel-image/build-r.sh.
//
//go:embed kernel-image/build-r.sh
var buildRScript []byte

// RImage is the kernel image with R: the kernel image plus Debian's r-base-core and
// r-cran-irkernel (kernelspec "ir"), built by [BuildRImage]. Sessions whose
// SessionSpec.Template.Kernel is "ir" need it (or an image like it) as their image.
const RImage = "kernelbox/kernel-r:latest"

// BuildImage builds the kernel image called image (empty means [DefaultImage]) by
// running the embedded kernel-image/build.sh with bash, streaming its output to
// stdout and stderr. An image already built from the same recipe is reused unless
// force is set. The script needs root (debootstrap, chroot), debootstrap, the docker
// CLI and a Debian mirror in the machine's apt sources; it takes a few minutes.
func BuildImage(ctx context.Context, image string, force bool, stdout, stderr io.Writer) error {
	if image == "" {
		image = DefaultImage
	}
	args := []string{image}
	if force {
		args = append(args, "--force")
	}
	return runScript(ctx, buildScript, args, stdout, stderr)
}

// BuildRImage builds the R kernel image called image (empty means [RImage]) on top of
// the kernel image base (empty means [DefaultImage]), which must exist and is not
// changed: the embedded kernel-image/build-r.sh installs r-base-core and
// r-cran-irkernel with apt in a container of base and commits it, as one layer of
// about 64 MB over base's. An image built from the same recipe on the same base image
// id is reused unless force is set. It needs the docker CLI and a Debian mirror in
// the machine's apt sources, reached over the host's network; about 45 seconds.
func BuildRImage(ctx context.Context, image, base string, force bool, stdout, stderr io.Writer) error {
	if image == "" {
		image = RImage
	}
	if base == "" {
		base = DefaultImage
	}
	args := []string{image, "--base", base}
	if force {
		args = append(args, "--force")
	}
	return runScript(ctx, buildRScript, args, stdout, stderr)
}

// runScript runs script with bash and args, streaming its output. args[0] is the
// image it builds, for the error.
func runScript(ctx context.Context, script []byte, args []string, stdout, stderr io.Writer) error {
	image := args[0]
	f, err := os.CreateTemp("", "kernelbox-build-*.sh")
	if err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(script); err != nil {
		f.Close()
		return fmt.Errorf("build image: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	cmd := exec.CommandContext(ctx, "bash", append([]string{f.Name()}, args...)...)
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
	c, err := dockerapi.NewClient("")
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
	case dockerapi.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("inspect image %s: %w", image, err)
	}
	return true, nil
}
