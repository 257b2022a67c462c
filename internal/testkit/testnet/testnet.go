// Package testnet builds a test internet for egress tests: hosts in network
// namespaces the test creates, each joined to the test's own network namespace by a
// veth pair on a /30 of its own, serving a directory over plain HTTP with Debian's
// Python. Nothing else is ever dialled: the addresses are the test's, made here and
// removed in the test's cleanup. Start reading at [New].
package testnet

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// Host is one test host: a network namespace serving Dir over HTTP on Port.
type Host struct {
	// Name is the namespace's name.
	Name string
	// Addr is the host's address; Peer is the test side's address on the link.
	Addr, Peer netip.Addr
	// Prefix is the link's /30.
	Prefix netip.Prefix
	// Port is the HTTP server's port.
	Port int
	// Dir is the directory it serves.
	Dir string
}

// URL returns the address of a file on the host, by address.
func (h *Host) URL(file string) string {
	return "http://" + net.JoinHostPort(h.Addr.String(), strconv.Itoa(h.Port)) + "/" + file
}

// Require skips the test (or fails it when KERNELBOX_REQUIRE_DOCKER=1, as the
// egress tests run beside the docker ones) unless it can make namespaces: root
// and the ip command.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		fail(t, "needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		fail(t, "needs the ip command (iproute2)")
	}
}

func fail(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("KERNELBOX_REQUIRE_DOCKER") == "1" {
		t.Fatalf("test internet: %s (KERNELBOX_REQUIRE_DOCKER=1)", why)
	}
	t.Skip("test internet: " + why)
}

// New makes a host named role: a namespace with a veth pair to the test's
// namespace on a random /30 of 10.200.0.0/13 not routed here yet, serving dir on
// port 8000. It is removed in t's cleanup.
func New(t testing.TB, role, dir string) *Host {
	t.Helper()
	return start(t, role, dir, 8000, func(py string, h *Host) []string {
		return []string{py, "-m", "http.server", strconv.Itoa(h.Port), "--bind", h.Addr.String(), "--directory", dir}
	})
}

// TLSServer is a Python program: http.server behind TLS, with the arguments
// address, port, directory, certificate file and key file. NewTLS runs it in a
// namespace; a test may run it in a container of its own (the swarm lab's).
const TLSServer = `import functools, http.server, ssl, sys
addr, port, d, cert, key = sys.argv[1:]
s = http.server.ThreadingHTTPServer((addr, int(port)), functools.partial(http.server.SimpleHTTPRequestHandler, directory=d))
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
`

// NewTLS is New serving HTTPS on port 8443 with the certificate and key files
// given (see CA).
func NewTLS(t testing.TB, role, dir, certFile, keyFile string) *Host {
	t.Helper()
	return start(t, role, dir, 8443, func(py string, h *Host) []string {
		return []string{py, "-c", TLSServer, h.Addr.String(), strconv.Itoa(h.Port), dir, certFile, keyFile}
	})
}

// start makes the namespace and runs the server command it is given.
func start(t testing.TB, role, dir string, port int, command func(py string, h *Host) []string) *Host {
	t.Helper()
	Require(t)
	py, _ := testenv.Python()
	if py == "" {
		py = "python3"
	}
	id := strconv.Itoa(os.Getpid()%100000) + role[:min(3, len(role))] + strconv.Itoa(rand.IntN(1000))
	h := &Host{Name: "kbnet-" + id, Port: port, Dir: dir}
	for range 20 {
		base := netip.AddrFrom4([4]byte{10, byte(200 + rand.IntN(8)), byte(rand.IntN(256)), byte(4 * rand.IntN(64))})
		h.Prefix = netip.PrefixFrom(base, 30)
		if !routed(t, h.Prefix) {
			break
		}
	}
	h.Peer = h.Prefix.Addr().Next()
	h.Addr = h.Peer.Next()
	hostIf, nsIf := "kbh"+id, "kbn"+id
	hostIf, nsIf = hostIf[:min(15, len(hostIf))], nsIf[:min(15, len(nsIf))]
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "pids", h.Name).Output(); err == nil {
			for _, p := range strings.Fields(string(out)) {
				exec.Command("kill", "-9", p).Run()
			}
		}
		exec.Command("ip", "link", "del", hostIf).Run()
		exec.Command("ip", "netns", "del", h.Name).Run()
	})
	run(t, "ip", "netns", "add", h.Name)
	run(t, "ip", "netns", "exec", h.Name, "ip", "link", "set", "lo", "up")
	run(t, "ip", "link", "add", hostIf, "type", "veth", "peer", "name", nsIf, "netns", h.Name)
	run(t, "ip", "addr", "add", h.Peer.String()+"/30", "dev", hostIf)
	run(t, "ip", "link", "set", hostIf, "up")
	run(t, "ip", "netns", "exec", h.Name, "ip", "addr", "add", h.Addr.String()+"/30", "dev", nsIf)
	run(t, "ip", "netns", "exec", h.Name, "ip", "link", "set", nsIf, "up")
	srv := exec.Command("ip", append([]string{"netns", "exec", h.Name}, command(py, h)...)...)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	waitListening(t, h)
	return h
}

// routed says whether the machine already has a route into p.
func routed(t testing.TB, p netip.Prefix) bool {
	out, err := exec.Command("ip", "-4", "route", "show", "match", p.Addr().String()).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.HasPrefix(l, "default") {
			return true
		}
	}
	return false
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// waitListening waits until the host's server accepts a connection.
func waitListening(t testing.TB, h *Host) {
	t.Helper()
	addr := net.JoinHostPort(h.Addr.String(), strconv.Itoa(h.Port))
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("test host %s: server not listening: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// String names the host for logs.
func (h *Host) String() string { return fmt.Sprintf("%s (%s)", h.Name, h.Addr) }
