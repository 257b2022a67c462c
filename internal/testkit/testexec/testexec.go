// Package testexec builds executors for tests: with their own workspace in a temp
// dir and the built-in policy, whose working directory is Env.Data (where tests put
// input files) and whose home is Env.Home (a fake one, so the secret rules can be
// exercised without touching the real home).
//
// It is the tests' wiring: tests of the layers above the backends (executor,
// httpapi, client) reach a real backend only through it (Local, Docker, Remote,
// LocalWith, DockerWith and the Real settings), never by importing a backend
// package. LocalWith's backends mark their kernels (Marked), so that a test counts
// and kills only its own kernels whatever runs beside it.
//
// Local (and SharedLocal) place sessions on a few Jupyter Servers the test binary
// shares (shared.go): most tests only run cells, and a server's start costs each
// of them a Python process importing Jupyter Server. LocalBackend and LocalWith start a server of their
// own, for the tests that count processes or kill, stop or freeze the server. A
// package whose TestMain uses leakcheck passes it CloseShared.
package testexec

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/backends/docker"
	"github.com/kernelbox/kernelbox/backends/local"
	"github.com/kernelbox/kernelbox/backends/remote"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/jupyterproc"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// Env is an executor with what it was built from.
type Env struct {
	Exec    *executor.Executor
	Backend executor.Backend
	WS      *workspace.Manager
	Data    string
	Home    string
}

// Local builds an executor on the local backend on one of the test binary's shared
// Jupyter Servers (SharedLocal; real Jupyter: it skips or fails t as
// testenv.Jupyter does). mod, if not nil, may change the options. A test that
// counts processes or kills the server takes On(t, LocalBackend(t), mod) or
// LocalWith, which start a server of their own.
func Local(t testing.TB, mod func(*executor.Options)) *Env {
	t.Helper()
	return On(t, SharedLocal(t), mod)
}

// LocalBackend is the local backend on a Python with Jupyter (it skips or
// fails t as testenv.Jupyter does), with a Jupyter Server of its own, for tests
// that build their executor themselves; the executor closes it.
func LocalBackend(t testing.TB) executor.Backend {
	t.Helper()
	b, err := local.New(local.Options{Python: testenv.Jupyter(t)})
	if err != nil {
		t.Fatalf("local backend: %v", err)
	}
	return b
}

// DockerBackend is the docker backend on the default kernel image (it skips
// or fails t as testenv.Image does), for tests that build their executor
// themselves; the executor closes it.
func DockerBackend(t testing.TB) executor.Backend {
	t.Helper()
	testenv.Image(t, docker.DefaultImage)
	b, err := docker.New(context.Background(), docker.Options{})
	if err != nil {
		t.Fatalf("docker backend: %v", err)
	}
	return b
}

// On builds an executor on backend b; the executor closes b at cleanup.
func On(t testing.TB, b executor.Backend, mod func(*executor.Options)) *Env {
	t.Helper()
	root := t.TempDir()
	env := &Env{Backend: b, Data: filepath.Join(root, "data"), Home: filepath.Join(root, "home")}
	for _, d := range []string{env.Data, filepath.Join(env.Home, ".ssh")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(root, "ws")})
	if err != nil {
		t.Fatalf("workspace: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	env.WS = ws
	opts := executor.Options{
		Backend:   b,
		Workspace: ws,
		Permissions: &permissions.Engine{
			Policy: permissions.DefaultPolicy(),
			Vars:   permissions.Vars{Workdir: env.Data, Home: env.Home, Artifacts: ws.ArtifactsDir()},
		},
		InterruptGrace: 2 * time.Second,
	}
	if mod != nil {
		mod(&opts)
	}
	e, err := executor.New(opts)
	if err != nil {
		t.Fatalf("executor: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close executor: %v", err)
		}
	})
	env.Exec = e
	return env
}

// Remote builds an executor on the remote backend against a real Jupyter Server
// (a gateway started on a loopback TCP port with a root directory of its own,
// stopped at cleanup; it skips or fails t as testenv.Jupyter does). mod, if not
// nil, may change the executor's options.
func Remote(t testing.TB, mod func(*executor.Options)) *Env {
	t.Helper()
	py := testenv.Jupyter(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := jupyterproc.Start(ctx, jupyterproc.Options{Python: py, RootDir: t.TempDir(), TCPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("start a gateway: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	ep := s.Endpoint()
	b, err := remote.New(ctx, remote.Options{Gateways: []remote.Gateway{{URL: ep.URL, Token: ep.Token}}, HealthInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("remote backend: %v", err)
	}
	return On(t, b, func(o *executor.Options) {
		o.StartTimeout = time.Minute
		if mod != nil {
			mod(o)
		}
	})
}
