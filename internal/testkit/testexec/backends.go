package testexec

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/kernelbox/kernelbox/backends/docker"
	"github.com/kernelbox/kernelbox/backends/local"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/procs"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/templates"
)

// Real is what tests of the layers above the backends may vary in a real backend,
// so that they reach the backends only through this package. The zero value is
// each backend's defaults.
type Real struct {
	// Memory is the docker container's memory limit in bytes. Defaults to the
	// backend's.
	Memory int64
	// PidsLimit is the docker container's process limit. Defaults to the backend's.
	PidsLimit int64
	// R runs docker sessions in the R kernel image (`image build --with r`).
	R bool
	// Env is added to the local server's and kernels' environment.
	Env []string
	// EgressTestHosts is the docker egress proxy's name resolution for a test
	// internet (docker.Options.EgressTestHosts).
	EgressTestHosts map[string][]netip.Addr
	// EgressUpstreamRoots verify the hosts the docker egress proxy intercepts for
	// a template's secrets (docker.Options.EgressUpstreamRoots).
	EgressUpstreamRoots *x509.CertPool
	// Logger is the docker backend's logger. Defaults to discarding.
	Logger *slog.Logger
	// Runtime is the docker containers' OCI runtime ("runsc": gVisor, which
	// testenv.Runsc requires). Defaults to the daemon's.
	Runtime string
}

// Marked is a local backend whose kernels carry a marker of their own in their
// environment, so that a test counts its own kernels (Kernels) whatever other
// tests beside it start. Give the executor Backend itself, not the Marked: the
// executor finds a backend's optional abilities by type assertion, which a wrapper
// would hide.
type Marked struct {
	Backend executor.Backend
	marker  string
}

// Kernels returns the pids of the live kernel processes (not servers) this
// backend started, found from the OS: a kernel that outlived its server or was
// reparented is still counted.
func (m *Marked) Kernels() []int {
	var out []int
	for _, pid := range procs.WithEnv(m.marker) {
		if procs.IsKernel(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// Procs returns the pids of the live servers and kernels this backend started.
func (m *Marked) Procs() []int { return procs.WithEnv(m.marker) }

// ServerPID returns the pid of the local backend's server supervisor, or 0 when
// none runs.
func (m *Marked) ServerPID() int {
	return m.Backend.(*local.Backend).ServerPID()
}

// LocalWith is the local backend with r's settings on a Python with Jupyter (it
// skips or fails t as testenv.Jupyter does); the executor it is given closes it.
func LocalWith(t testing.TB, r Real) *Marked {
	t.Helper()
	marker := newMarker(t)
	b, err := local.New(local.Options{Python: testenv.Jupyter(t), Env: append(r.Env, marker)})
	if err != nil {
		t.Fatalf("local backend: %v", err)
	}
	return &Marked{Backend: b, marker: marker}
}

// DockerWith is the docker backend with r's settings (it skips or fails t as
// testenv.Image does when the image is missing); the executor it is given closes it.
func DockerWith(t testing.TB, r Real) executor.Backend {
	t.Helper()
	o := docker.Options{Memory: r.Memory, PidsLimit: r.PidsLimit, Image: docker.DefaultImage, EgressTestHosts: r.EgressTestHosts,
		EgressUpstreamRoots: r.EgressUpstreamRoots, Logger: r.Logger, Runtime: r.Runtime}
	if r.Runtime == docker.RuntimeGVisor {
		testenv.Runsc(t)
	}
	if r.R {
		o.Image = docker.RImage
	}
	testenv.Image(t, o.Image)
	b, err := docker.New(context.Background(), o)
	if err != nil {
		t.Fatalf("docker backend: %v", err)
	}
	return b
}

// Docker builds an executor on the docker backend with r's settings.
func Docker(t testing.TB, r Real, mod func(*executor.Options)) *Env {
	t.Helper()
	return On(t, DockerWith(t, r), mod)
}

// DefaultImage and RImage are the docker backend's kernel images.
const (
	DefaultImage = docker.DefaultImage
	RImage       = docker.RImage
)

// newMarker returns a NAME=VALUE unique to one backend.
func newMarker(t testing.TB) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "KERNELBOX_TEST_BACKEND=" + hex.EncodeToString(b)
}

// The docker backend's container labels, for tests that find their containers.
const (
	LabelSession = docker.LabelSession // the session id a container was made for
	LabelOwner   = docker.LabelOwner   // "PID:…" of the kernelbox process that made it
)

// DockerCaps are the caps `kernelbox serve --backend docker` puts on templates with
// the given memory limit (0: the backend's default): the docker options' limits,
// as serve derives them.
func DockerCaps(memory int64) templates.Caps {
	return templates.LimitCaps(docker.Options{Memory: memory}.Limits())
}
