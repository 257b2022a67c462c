package docker

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/jupyter"
)

// What a kernel under gVisor can try against its way out (the relay's socket)
// and the host, as a prompt-injected model would.

// TestRunscKernelReachesNothingElse: from session A's kernel, the relay socket of
// session B (by its host path, through /proc/1/root, through a symlink the kernel
// plants on its bind mount), a host socket standing in for kernelbox's API, and
// the docker socket are all out of reach; the only socket the kernel finds in
// the mounted and writable places outside its own /tmp is its own relay's.
func TestRunscKernelReachesNothingElse(t *testing.T) {
	t.Parallel()
	b := newRunscBackend(t, Options{})
	pa := openPlacement(t, b, executor.SessionSpec{ID: "runsc-a", Dir: sessionDir(t)})
	pb := openPlacement(t, b, executor.SessionSpec{ID: "runsc-b", Dir: sessionDir(t)})
	// A stand-in for kernelbox's API socket: a host socket in a host directory.
	apiDir := t.TempDir()
	if err := os.Chmod(apiDir, 0o755); err != nil {
		t.Fatal(err)
	}
	apiSock := filepath.Join(apiDir, "api.sock")
	ln, err := net.Listen("unix", apiSock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chmod(apiSock, 0o666); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(pb.sockDir, relaySocketName)
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("session B's relay socket on the host: %v", err)
	}
	srv := pa.Server()
	k := dialKernel(t, srv, startKernel(t, srv))
	got := k.run(`import os, socket
def reach(p):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    try:
        s.connect(p)
        return "CONNECTED"
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()
targets = [` + strconv.Quote(other) + `, "/proc/1/root" + ` + strconv.Quote(other) + `, ` + strconv.Quote(apiSock) + `,
           "/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock"]
os.symlink(` + strconv.Quote(other) + `, "/workspace/outputs/to-b.sock")
os.symlink("/", "/workspace/outputs/root")
targets += ["/workspace/outputs/to-b.sock", "/workspace/outputs/root" + ` + strconv.Quote(apiSock) + `]
for p in targets:
    print(reach(p))
found = []
# Every mounted or writable place but /tmp (the image's own tree has no socket; a
# walk of all of / takes a minute under ptrace).
for top in ("/run", "/var", "/workspace", "/mnt", "/home", "/srv", "/media", "/opt", "/root"):
    for d, dirs, files in os.walk(top):
        for f in files:
            p = os.path.join(d, f)
            try:
                if os.lstat(p).st_mode & 0o170000 == 0o140000:
                    found.append(p)
            except OSError:
                pass
print(sorted(found))`)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 9 {
		t.Fatalf("kernel printed %q", got)
	}
	for i, l := range lines[:8] {
		if l == "CONNECTED" {
			t.Errorf("target %d reached from the kernel: %q", i, got)
		}
	}
	if lines[8] != "['/run/kernelbox/relay.sock']" {
		t.Errorf("sockets the kernel finds outside /tmp: %s", lines[8])
	}
	// On the host the kernel's symlink is a symlink (kernelbox's workspace never
	// follows one), and session B's relay never saw a connection from A: its only
	// connections are its own relay's.
	if fi, err := os.Lstat(filepath.Join(pa.b.sockRoot, pa.key, "..", "..")); err != nil || !fi.IsDir() {
		t.Fatalf("socket root: %v", err)
	}
	if n := pb.relay.refused.Load(); n != 0 {
		t.Errorf("session B's relay socket refused %d connections: something but its relay reached it", n)
	}
}

// TestRunscRelayFlood: a kernel that floods its relay's socket with connections
// (idle ones claiming to be the relay's, second control connections, silent
// ones, junk) is bounded - kernelbox holds at most relayMaxIdle idle connections
// and refuses and counts the rest - and once the kernel lets go, its server is
// reached again.
func TestRunscRelayFlood(t *testing.T) {
	t.Parallel()
	b := newRunscBackend(t, Options{})
	p := openPlacement(t, b, executor.SessionSpec{ID: "runsc-flood", Dir: sessionDir(t)})
	srv := p.Server()
	k := dialKernel(t, srv, startKernel(t, srv))
	k.run(`import socket
held = []
for i in range(300):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect("/run/kernelbox/relay.sock")
        s.send([b"P", b"C", b"", b"XYZ"][i % 4])
        held.append(s)
    except OSError:
        s.close()
print(len(held))`)
	deadline := time.Now().Add(10 * time.Second)
	for p.relay.refused.Load() < 100 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	p.relay.mu.Lock()
	held := len(p.relay.conns)
	p.relay.mu.Unlock()
	t.Logf("refused %d, idle held %d", p.relay.refused.Load(), held)
	if n := p.relay.refused.Load(); n < 100 {
		t.Errorf("refused %d of 300 connections", n)
	}
	if held > relayMaxIdle {
		t.Errorf("kernelbox holds %d idle connections; the bound is %d", held, relayMaxIdle)
	}
	// The kernel lets go (this very call went through a relay connection).
	k.run("for s in held: s.close()\nheld = []")
	c, err := jupyter.NewClient(srv.Endpoint, &jupyter.ClientOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdle()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if _, err = c.Version(ctx); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("the server through the relay after the flood: %v", err)
	}
	select {
	case <-p.Lost():
		t.Fatal("the flood lost the session")
	default:
	}
}

// TestRunscReattach: a runsc container kept across a restart of kernelbox
// (Detach, then a new backend on the same state file) is taken back through its
// relay, which connects to the new process's socket by itself, with its kernel's
// state.
func TestRunscReattach(t *testing.T) {
	t.Parallel()
	testenv.Runsc(t)
	opts := Options{Runtime: RuntimeGVisor, SocketRoot: t.TempDir(), StateFile: filepath.Join(t.TempDir(), "docker.json")}
	b1, _ := newTestBackend(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := b1.Open(ctx, executor.SessionSpec{ID: "runsc-rt", Dir: sessionDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := p.Server()
	kid := startKernel(t, srv)
	k := dialKernel(t, srv, kid)
	k.run("x = 7")
	_ = k.ws.Close()
	if err := b1.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	b2, _ := newTestBackend(t, opts)
	t0 := time.Now()
	got, err := b2.Reattach(ctx)
	if err != nil || len(got) != 1 || got[0].Placement == nil {
		t.Fatalf("Reattach: %+v %v", got, err)
	}
	t.Logf("reattached through the relay in %s", time.Since(t0).Round(time.Millisecond))
	p2 := got[0].Placement.(*Placement)
	t.Cleanup(func() { _ = p2.Close(context.Background()) })
	if p2.relay == nil || p2.Server().Endpoint.Dial == nil {
		t.Fatalf("adopted placement without its relay: %+v", p2.Server().Endpoint)
	}
	k2 := dialKernel(t, p2.Server(), kid)
	if out := k2.run("print(x)"); out != "7\n" {
		t.Errorf("the adopted kernel's x = %q", out)
	}
}
