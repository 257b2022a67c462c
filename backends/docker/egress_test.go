package docker

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
)

// The forwarder's command line keeps today's bounds: loopback only, a listen
// queue of 128, and at most max_conns plus a few processes at once (so one past
// the limit still hears the proxy's refusal), never more than
// forwarderMaxChildren whatever max_conns says.
func TestForwarderCmdBounds(t *testing.T) {
	for _, c := range []struct{ conns, children int }{{32, 48}, {1, 17}, {10_000, forwarderMaxChildren}} {
		cmd := forwarderCmd(c.conns, egressSocket)
		want := []string{"socat", "-b262144", "-t3600",
			"TCP4-LISTEN:3128,bind=127.0.0.1,reuseaddr,fork,backlog=128,max-children=" + strconv.Itoa(c.children),
			"UNIX-CONNECT:" + egressSocket}
		if !slices.Equal(cmd, want) {
			t.Errorf("max_conns %d: %q, want %q", c.conns, cmd, want)
		}
	}
	relay := relayCmd("python3", true, 32)
	if got := relay[len(relay)-5:]; !slices.Equal(got, forwarderCmd(32, relayEgress)) {
		t.Errorf("the relay's forwarder: %q", got)
	}
	if got := relayCmd("python3", false, 0); len(got) != 6 {
		t.Errorf("the relay without an allowlist: %q", got[3:])
	}
}

// listening finds a listening socket in a /proc/<pid>/net/tcp by its port, on
// loopback or any address, and not a connected one or another port; a missing
// file is an error, not "not yet".
func TestForwarderListening(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if ok, err := listening("/proc/self/net/tcp", port); !ok || err != nil {
		t.Fatalf("this process's listener on %d: %v %v", port, ok, err)
	}
	dir := t.TempDir()
	table := func(lines ...string) string {
		p := filepath.Join(dir, strconv.Itoa(len(lines))+"-"+strconv.Itoa(int(time.Now().UnixNano())))
		body := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" + strings.Join(lines, "\n")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		line string
		want bool
	}{
		{"   0: 0100007F:0C38 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1", true},
		{"   0: 00000000:0C38 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1", true},
		{"   0: 0100007F:0C38 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 1 1", false}, // established
		{"   0: 0100007F:0C39 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1", false}, // 3129
		{"   0: 0200000A:0C38 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1", false}, // 10.0.0.2
		{"garbage", false},
	} {
		if ok, err := listening(table(c.line), egressPort); ok != c.want || err != nil {
			t.Errorf("%q: %v %v, want %v", c.line, ok, err, c.want)
		}
	}
	if _, err := listening(filepath.Join(dir, "none"), egressPort); err == nil {
		t.Error("a missing table: no error")
	}
}

// TestForwarderInContainer opens a session with an allowlist on each way the
// kernel reaches its proxy — runc's listener in the container's network
// namespace (no forwarder), runc with that path disabled (the forwarder is its
// own docker exec: what an unprivileged kernelbox falls back to), and the relay
// (the forwarder is the relay's child) — and checks from the kernel which
// forwarder runs (socat as the kernel's user with its bounds, or none at all)
// and that a request on 127.0.0.1:3128 reaches the proxy, which refuses a host
// not on the list with its 403.
func TestForwarderInContainer(t *testing.T) {
	t.Parallel()
	rules, err := egress.Compile(egress.Policy{Allow: []string{"files.test"}, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, transport string
		forwarderOnly   bool
		socat           bool
	}{
		{"netns", TransportPinned, false, false},
		{"forwarder", TransportPinned, true, true},
		{"relay", TransportRelay, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b, _ := newTestBackend(t, Options{Transport: c.transport})
			b.cfg.egressForwarderOnly = c.forwarderOnly
			p := openPlacement(t, b, executor.SessionSpec{ID: "fwd-" + c.name, Dir: sessionDir(t),
				Template: executor.Template{Name: "net", Network: rules}})
			srv := p.Server()
			k := dialKernel(t, srv, startKernel(t, srv))
			out := k.run(findSocat + `
s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
s.sendall(b"GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n")
print(found)
print(s.recv(64).split(b"\r\n")[0].decode())`)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 2 {
				t.Fatalf("kernel output %q", out)
			}
			wantUID := strconv.Itoa(kernelUID()) + " "
			switch {
			case c.socat && (!strings.Contains(lines[0], "'"+wantUID+"socat ") || !strings.Contains(lines[0], "max-children=24")):
				t.Errorf("forwarder processes %s: want socat as uid %s with max-children=24", lines[0], wantUID)
			case !c.socat && lines[0] != "[]":
				t.Errorf("forwarder processes %s: want none (the proxy listens in the container's namespace)", lines[0])
			}
			if !strings.HasPrefix(lines[1], "HTTP/1.1 403") {
				t.Errorf("a denied host through 127.0.0.1:3128: %q, want the proxy's 403", lines[1])
			}
		})
	}
}

// findSocat is kernel code that lists, in found, the container's socat
// processes as "uid argv".
const findSocat = `import os, socket
found = []
for d in os.listdir("/proc"):
    try:
        argv = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
        if argv[0] == b"socat":
            uid = [l.split()[1] for l in open(f"/proc/{d}/status") if l.startswith("Uid:")][0]
            found.append(uid + " " + b" ".join(argv).decode())
    except (OSError, ValueError):
        pass
`

// The relay's program, with the forwarder's port put in, is Python that
// compiles (a mistake in it shows only as a relay that never connects).
func TestRelayProgramCompiles(t *testing.T) {
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		t.Skip("no /usr/bin/python3")
	}
	prog := relayCmd(py, true, 32)[2]
	if out, err := exec.Command(py, "-c", "import sys; compile(sys.argv[1], 'relay', 'exec')", prog).CombinedOutput(); err != nil {
		t.Fatalf("the relay program does not compile: %v: %s", err, out)
	}
}
