package docker

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
)

// egressListenerInode returns the inode of the socket listening on
// 127.0.0.1:egressPort in the network namespace of process pid, or "".
func egressListenerInode(t testing.TB, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[3] == "0A" && f[1] == "0100007F:0C38" {
			return f[9]
		}
	}
	return ""
}

// holdsSocket reports whether this process has a descriptor on socket inode.
func holdsSocket(t testing.TB, inode string) bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && l == "socket:["+inode+"]" {
			return true
		}
	}
	return false
}

// openFDs counts this process's descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// TestEgressNetnsAbuse: on runc the kernel's 127.0.0.1:3128 is a socket of
// kernelbox's own (this process holds it; no forwarder runs in the container),
// and the kernel, acting as an abuser, cannot take the port (with or without
// SO_REUSEADDR/SO_REUSEPORT, on 127.0.0.1 or 0.0.0.0), reaches only the proxy
// through it (kernelbox's own loopback is refused like any host off the
// list), and cannot make kernelbox hold more descriptors than the session's
// max_conns plus the proxy's few refusals in flight, however many connections
// it opens. When the container goes, the listener goes with it. Not parallel:
// it counts this process's descriptors.
func TestEgressNetnsAbuse(t *testing.T) {
	const maxConns = 8
	rules, err := egress.Compile(egress.Policy{Allow: []string{"files.test"}, MaxConns: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newTestBackend(t, Options{Transport: TransportPinned})
	p := openPlacement(t, b, executor.SessionSpec{ID: "netns-abuse", Dir: sessionDir(t),
		Template: executor.Template{Name: "net", Network: rules}})
	inode := egressListenerInode(t, p.pid)
	if inode == "" || !holdsSocket(t, inode) {
		t.Fatalf("the container's 127.0.0.1:3128 (socket %q) is not this process's", inode)
	}
	srv := p.Server()
	k := dialKernel(t, srv, startKernel(t, srv))
	if out := strings.TrimSpace(k.run(findSocat + "print(found)")); out != "[]" {
		t.Errorf("forwarder processes in the container: %s", out)
	}

	out := k.run(`import errno, socket
for host in ("127.0.0.1", "0.0.0.0"):
    for opts in ((), (socket.SO_REUSEADDR,), (socket.SO_REUSEPORT,), (socket.SO_REUSEADDR, socket.SO_REUSEPORT)):
        s = socket.socket()
        for o in opts:
            s.setsockopt(socket.SOL_SOCKET, o, 1)
        try:
            s.bind((host, 3128))
            s.listen()
            print("bound", host, opts)
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                print("error", host, opts, e)
        s.close()`)
	if strings.TrimSpace(out) != "" {
		t.Errorf("the kernel took the proxy's port: %s", out)
	}

	// kernelbox's own loopback, through the proxy: refused as off the list.
	own, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	port := strconv.Itoa(own.Addr().(*net.TCPAddr).Port)
	out = k.run(`import socket
for req in (b"CONNECT 127.0.0.1:` + port + ` HTTP/1.1\r\nHost: 127.0.0.1:` + port + `\r\n\r\n", b"GET http://127.0.0.1:` + port + `/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(req)
    print(s.recv(64).split(b"\r\n")[0].decode())
    s.close()`)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "HTTP/1.1 403") {
			t.Errorf("kernelbox's loopback through the proxy: %q, want 403", l)
		}
	}

	floodDescriptors(t, k, p, maxConns)

	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if holdsSocket(t, inode) {
		t.Error("the listener outlived its container")
	}
}

// floodDescriptors has the kernel open and hold 300 idle connections to its
// proxy, and checks what that costs this process in descriptors.
func floodDescriptors(t *testing.T, k *kernel, p *Placement, maxConns int) {
	t.Helper()
	const flood = 300
	before := openFDs(t)
	out := k.run(`import socket
HOLD = []
for _ in range(` + strconv.Itoa(flood) + `):
    HOLD.append(socket.create_connection(("127.0.0.1", 3128), timeout=20))
print(len(HOLD))`)
	if strings.TrimSpace(out) != strconv.Itoa(flood) {
		t.Fatalf("the kernel's flood: %q", out)
	}
	// At most max_conns held, plus the refusals draining (16 at once) and
	// a few of the test's own.
	peak := openFDs(t) - before
	deadline := time.Now().Add(5 * time.Second)
	settled := peak
	for settled > maxConns+4 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		settled = openFDs(t) - before
	}
	st, _ := p.EgressStats()
	t.Logf("%d connections from the kernel: this process's descriptors +%d at once, +%d settled; proxy %+v", flood, peak, settled, st)
	if peak > maxConns+16+8 || settled > maxConns+4 {
		t.Errorf("descriptors grew by %d (settled %d) for %d idle connections; max_conns is %d", peak, settled, flood, maxConns)
	}
	if st.Active > maxConns || st.Refused < flood-int64(maxConns) {
		t.Errorf("proxy counters %+v: want at most %d active and the rest refused", st, maxConns)
	}
	k.run("for s in HOLD: s.close()\nHOLD.clear()")
}

// TestEgressPortTaken: what the proxy's listener does when something in the
// container listens on 127.0.0.1:3128 first. Nothing of the kernel runs before
// Open makes the listener, but should the port be taken, the listener is not
// made and the open fails (the forwarder would not get the port either): the
// error is the bind's, not a fallback. Once the port is free it is made, in
// the container's namespace (the kernel's bind is what stopped it).
func TestEgressPortTaken(t *testing.T) {
	t.Parallel()
	b, _ := newTestBackend(t, Options{Transport: TransportPinned})
	p := openPlacement(t, b, executor.SessionSpec{ID: "netns-taken", Dir: sessionDir(t)})
	srv := p.Server()
	k := dialKernel(t, srv, startKernel(t, srv))
	k.run(`import socket
TAKEN = socket.socket()
TAKEN.bind(("127.0.0.1", 3128))
TAKEN.listen()`)
	ln, err := b.listenEgressNetns(p.pid, p.sockDev, p.sockIno)
	if err == nil {
		ln.Close()
		t.Fatal("listened on a port the kernel holds")
	}
	if !errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, errNoNetns) {
		t.Fatalf("the kernel holding the port: %v, want EADDRINUSE and no fallback", err)
	}
	k.run("TAKEN.close()")
	ln, err = b.listenEgressNetns(p.pid, p.sockDev, p.sockIno)
	if err != nil {
		t.Fatalf("the port free again: %v", err)
	}
	defer ln.Close()
	if ino := egressListenerInode(t, p.pid); ino == "" || !holdsSocket(t, ino) {
		t.Fatalf("the listener (socket %q) is not in the container's namespace", ino)
	}
}

// TestEgressAfterRestart: a session whose proxy listens in its container's
// network namespace is kept by a detaching kernelbox (which lets go of the
// listener) and taken back by the next, which listens there again: the
// kernel's proxy port is the new process's socket and refuses a host off the
// list. If the kernel binds the port while no kernelbox listens, the next
// kernelbox does not take the container back (what answers there is not the
// proxy): the record comes back lost with the reason and the container is
// removed.
func TestEgressAfterRestart(t *testing.T) {
	t.Parallel()
	rules, err := egress.Compile(egress.Policy{Allow: []string{"files.test"}, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Transport: TransportPinned, SocketRoot: t.TempDir(), StateFile: filepath.Join(t.TempDir(), "docker.json")}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b1, _ := newTestBackend(t, opts)
	p1 := openPlacement(t, b1, executor.SessionSpec{ID: "eg-restart", Dir: sessionDir(t), Template: executor.Template{Name: "net", Network: rules}})
	inode1 := egressListenerInode(t, p1.pid)
	if err := b1.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	if inode1 == "" || holdsSocket(t, inode1) {
		t.Errorf("the detached process's listener (socket %q) is still held", inode1)
	}

	b2, api := newTestBackend(t, opts)
	got, err := b2.Reattach(ctx)
	if err != nil || len(got) != 1 || got[0].Placement == nil {
		t.Fatalf("Reattach: %+v %v", got, err)
	}
	p2 := got[0].Placement.(*Placement)
	inode2 := egressListenerInode(t, p2.pid)
	if inode2 == "" || inode2 == inode1 || !holdsSocket(t, inode2) {
		t.Fatalf("the adopted container's 127.0.0.1:3128 (socket %q, was %q) is not the new process's", inode2, inode1)
	}
	k := proxyRefuses(t, p2, "the adopted session's proxy")
	if rep := p2.TakeNetwork(); rep.Refused != 1 {
		t.Errorf("the adopted session's network report %+v: want the refusal", rep)
	}

	if err := b2.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	if holdsSocket(t, inode2) {
		t.Errorf("the detached process's listener (socket %q) is still held", inode2)
	}
	// SO_REUSEADDR: the proxy's side of the connection above lingers on the
	// port (FIN_WAIT2) after its listener closed.
	k.run(`import socket
s.close()
TAKEN = socket.socket()
TAKEN.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
TAKEN.bind(("127.0.0.1", 3128))
TAKEN.listen()`)
	b3, _ := newTestBackend(t, opts)
	got, err = b3.Reattach(ctx)
	if err != nil || len(got) != 1 || got[0].Placement != nil || !strings.Contains(got[0].Lost, "was taken while kernelbox was not running") {
		t.Fatalf("Reattach with the port taken by the kernel: %+v %v", got, err)
	}
	if _, err := api.ContainerInspect(ctx, p2.ContainerID(), client.ContainerInspectOptions{}); err == nil {
		t.Error("the container not taken back is still there")
	}
}

// TestEgressForwarderNotAdopted: a session whose kernel reaches its proxy
// through the forwarder (the fallback) cannot be taken back by the next
// kernelbox — the socket the forwarder dials went with the process — as before
// the listener in the namespace: a state file that lists it (a kernelbox
// killed, not detached; the first backend here never detaches) gives it back
// lost with the reason and its container removed, and a new session's egress
// works.
func TestEgressForwarderNotAdopted(t *testing.T) {
	t.Parallel()
	rules, err := egress.Compile(egress.Policy{Allow: []string{"files.test"}, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Transport: TransportPinned, SocketRoot: t.TempDir(), StateFile: filepath.Join(t.TempDir(), "docker.json")}
	tmpl := executor.Template{Name: "net", Network: rules}
	b1, _ := newTestBackend(t, opts)
	b1.cfg.egressForwarderOnly = true
	p1 := openPlacement(t, b1, executor.SessionSpec{ID: "eg-fwd", Dir: sessionDir(t), Template: tmpl})

	b2, api := newTestBackend(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	got, err := b2.Reattach(ctx)
	if err != nil || len(got) != 1 || got[0].Placement != nil || !strings.Contains(got[0].Lost, "egress proxy ran in the previous kernelbox process") {
		t.Fatalf("Reattach: %+v %v", got, err)
	}
	if _, err := api.ContainerInspect(ctx, p1.ContainerID(), client.ContainerInspectOptions{}); err == nil {
		t.Error("the unadopted container is still there")
	}
	if err := p1.Close(ctx); err != nil {
		t.Errorf("the first process's close: %v", err)
	}

	p2 := openPlacement(t, b2, executor.SessionSpec{ID: "eg-fwd-2", Dir: sessionDir(t), Template: tmpl})
	_ = proxyRefuses(t, p2, "the new session's proxy")
}

// TestListenInNetnsRefused: where kernelbox may not enter a network namespace
// the error says so (errNoNetns, with the system's EPERM), which is what sends
// a session to the forwarder. As root the check runs in a child process of this
// test in a user namespace of its own, where it is root without any right over
// the host's namespaces (a kernelbox run in a user namespace, or without
// CAP_SYS_ADMIN); otherwise in this process.
func TestListenInNetnsRefused(t *testing.T) {
	if os.Getenv("KERNELBOX_NETNS_CHILD") != "1" && os.Geteuid() == 0 {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestListenInNetnsRefused$", "-test.v")
		cmd.Env = append(os.Environ(), "KERNELBOX_NETNS_CHILD=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("in a user namespace: %v\n%s", err, out)
		}
		t.Logf("in a user namespace:\n%s", out)
		return
	}
	ns, err := os.Open("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	ln, err := listenInNetns(ns, "127.0.0.1:0")
	if err == nil {
		ln.Close()
		t.Fatal("entered a network namespace without the right to")
	}
	if !errors.Is(err, errNoNetns) || !errors.Is(err, syscall.EPERM) {
		t.Fatalf("%v: want errNoNetns and EPERM", err)
	}
	t.Logf("refused: %v", err)
}

// proxyRefuses checks, from a kernel of p, that a request through its proxy on
// 127.0.0.1:3128 for a host outside the allowlist gets the proxy's 403.
// It returns the kernel, whose variables s (the connection) the caller may use.
func proxyRefuses(t *testing.T, p *Placement, what string) *kernel {
	t.Helper()
	srv := p.Server()
	k := dialKernel(t, srv, startKernel(t, srv))
	out := k.run(`import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
s.sendall(b"GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n")
print(s.recv(64).split(b"\r\n")[0].decode())`)
	if !strings.HasPrefix(out, "HTTP/1.1 403") {
		t.Errorf("%s: %q, want its 403", what, out)
	}
	return k
}
