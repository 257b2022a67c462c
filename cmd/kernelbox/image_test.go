package main

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/docker"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// A language image other than R is a usage error, before anything is built.
func TestImageBuildWithUnknown(t *testing.T) {
	var out strings.Builder
	err := imageCmd(context.Background(), []string{"build", "--with", "julia"}, &out, &out)
	var ec exitCode
	require.True(t, errors.As(err, &ec), "%v", err)
	require.Equal(t, 2, ec.code)
	require.Contains(t, ec.msg, `--with "julia"`)
	require.Contains(t, ec.msg, "--with r")
	require.Empty(t, out.String())
}

// `image build --with r` on a machine that has both images reuses both (make image
// runs it on every `make test`): nothing is rebuilt, and the R image's labels tie it
// to the kernel image it was built on.
func TestImageBuildWithRReuses(t *testing.T) {
	testenv.Image(t, docker.DefaultImage)
	testenv.Image(t, docker.RImage)
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, imageCmd(ctx, []string{"build", "--with", "r"}, &out, &out), out.String())
	require.Contains(t, out.String(), "image "+docker.DefaultImage+" already built")
	require.Contains(t, out.String(), "image "+docker.RImage+" already built")
	base, err := exec.Command("docker", "image", "inspect", "-f", "{{.Id}}", docker.DefaultImage).Output()
	require.NoError(t, err)
	label, err := exec.Command("docker", "image", "inspect", "-f", `{{index .Config.Labels "io.kernelbox.base"}}`, docker.RImage).Output()
	require.NoError(t, err)
	require.Equal(t, strings.TrimSpace(string(base)), strings.TrimSpace(string(label)))
}
