package docker

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// The docker backend under gVisor (runtime runsc). These tests need the runtime
// registered (scripts/setup.sh --gvisor); with KERNELBOX_REQUIRE_RUNSC=1 (CI) its
// absence fails them.

// newRunscBackend is newTestBackend with the runtime runsc.
func newRunscBackend(t testing.TB, opts Options) *Backend {
	t.Helper()
	testenv.Runsc(t)
	opts.Runtime = RuntimeGVisor
	b, _ := newTestBackend(t, opts)
	return b
}

// TestRunscIsolation is the isolation probe: a kernel under runsc sees gVisor's
// kernel (4.4.0), only lo, and none of the host's processes; the server is reached
// through the relay (no socket path), and files cross the bind mount both ways.
func TestRunscIsolation(t *testing.T) {
	t.Parallel()
	b := newRunscBackend(t, Options{})
	dir := sessionDir(t)
	p := openPlacement(t, b, executor.SessionSpec{ID: "runsc-probe", Dir: dir})
	srv := p.Server()
	if srv.Endpoint.Socket != "" || srv.Endpoint.Dial == nil || p.relay == nil {
		t.Fatalf("under runsc the server must be reached through the relay: %+v", srv.Endpoint)
	}
	var api struct{ Version string }
	if code := restCall(t, srv, http.MethodGet, "/api", nil, &api); code != http.StatusOK {
		t.Fatalf("GET /api through the relay: %d", code)
	}
	k := dialKernel(t, srv, startKernel(t, srv))
	if got := k.run("import os; print(os.uname().release)"); got != "4.4.0\n" {
		t.Errorf("uname -r in the kernel = %q, want gVisor's 4.4.0", got)
	}
	if got := k.run("import socket; print(sorted(n for _, n in socket.if_nameindex()))"); got != "['lo']\n" {
		t.Errorf("interfaces = %q, want only lo", got)
	}
	// The host's own processes (this test's, dockerd) are not in the sandbox's
	// /proc; only the container's few are.
	got := k.run(`import os
cmds = []
for d in os.listdir("/proc"):
    if d.isdigit():
        try:
            cmds.append(open("/proc/%s/cmdline" % d, "rb").read().replace(b"\0", b" ").decode())
        except OSError:
            pass
print(len(cmds)); print("\n".join(cmds))`)
	if n, _ := strconv.Atoi(strings.SplitN(got, "\n", 2)[0]); n == 0 || n > 12 ||
		strings.Contains(got, "dockerd") || strings.Contains(got, "containerd") || strings.Contains(got, ".test") {
		t.Errorf("processes seen in the sandbox:\n%s", got)
	}
	// Files: written by the kernel, read on the host; written on the host after the
	// kernel has looked, read by the kernel (staging during a session).
	k.run(`open("outputs/k.txt", "w").write("from the kernel")`)
	if b, err := os.ReadFile(filepath.Join(dir, "outputs", "k.txt")); err != nil || string(b) != "from the kernel" {
		t.Errorf("host reads the kernel's file: %q, %v", b, err)
	}
	k.run(`import os; print(os.listdir("inputs"))`)
	if err := os.WriteFile(filepath.Join(dir, "inputs", "h.txt"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := k.run(`print(open("inputs/h.txt").read())`); got != "from the host\n" {
		t.Errorf("kernel reads the host's file: %q", got)
	}
}

// TestRunscUnknownRuntime: a runtime the daemon does not know fails New with
// ErrNoRuntime, naming the known ones, and a template's fails its session's
// Open; never a silent fallback to runc.
func TestRunscUnknownRuntime(t *testing.T) {
	t.Parallel()
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := New(ctx, Options{Runtime: "no-such-runtime", SocketRoot: t.TempDir()})
	if !errors.Is(err, ErrNoRuntime) || !strings.Contains(err.Error(), "no-such-runtime") || !strings.Contains(err.Error(), "runc") {
		t.Fatalf("New with an unknown runtime: %v", err)
	}
	// A template's runtime: its session fails to open, before any container.
	b, api := newTestBackend(t, Options{})
	_, err = b.Open(ctx, executor.SessionSpec{ID: "bad-runtime", Dir: sessionDir(t), Template: executor.Template{Runtime: "no-such-runtime"}})
	if !errors.Is(err, ErrNoRuntime) || !strings.Contains(err.Error(), "no-such-runtime") {
		t.Fatalf("Open with a template's unknown runtime: %v", err)
	}
	if n := countContainers(t, api, LabelInstance+"="+b.instance); n != 0 {
		t.Errorf("%d containers made for a session whose runtime is unknown", n)
	}
}
