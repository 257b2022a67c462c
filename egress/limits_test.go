package egress

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// connectTLS opens a CONNECT tunnel to target and starts TLS with serverName.
func (n *testNet) connectTLS(tb testing.TB, target, serverName string) error {
	tb.Helper()
	c, err := net.DialTimeout("tcp", n.addr, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufioReader(c), &http.Request{Method: "CONNECT"})
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != 200 {
		tb.Fatalf("CONNECT %s: %s", target, resp.Status)
	}
	tc := tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: true})
	return tc.Handshake()
}

func TestProxyServerNameMismatch(t *testing.T) {
	t.Parallel()
	n := newTestNet(t, allowTest(true, nil), nil)
	target := "tls.test:" + strconv.Itoa(n.tlsPort)
	if err := n.connectTLS(t, target, "tls.test"); err != nil {
		t.Fatalf("matching server name: %v", err)
	}
	// The allowed tunnel's record comes when the proxy sees it close; wait for it, so
	// that the refused one's is the newest (in a rehearsal under load it came after).
	if r := n.record(t, "tls.test"); r.Decision.Rule == "server name mismatch" {
		t.Fatalf("the matching server name was refused: %+v", r)
	}
	if err := n.connectTLS(t, target, "denied.test"); err == nil {
		t.Fatal("a ClientHello naming another host passed")
	}
	deadline := time.Now().Add(20 * time.Second)
	for n.proxy.Stats().Refused < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	r := n.record(t, "tls.test")
	if r.Decision.Rule != "server name mismatch" || r.Up != 0 {
		t.Fatalf("record %+v; want a server name mismatch with nothing sent on", r)
	}
}

func TestProxyByteLimit(t *testing.T) {
	t.Parallel()
	n := newTestNet(t, allowTest(true, func(p *Policy) { p.MaxBytes = 256 << 10 }), nil)
	c := n.client()
	resp, err := c.Get(fmt.Sprintf("http://files.test:%d/big", n.httpPort))
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(b) >= bigBody {
			t.Fatalf("read %d bytes past a 256 KiB limit", len(b))
		}
	}
	r := n.record(t, "files.test")
	if r.Decision.Rule != "byte limit" || r.Down > 256<<10 {
		t.Fatalf("record %+v", r)
	}
	// The session has spent its bytes: the next connection is refused up front.
	status, body := n.raw(t, fmt.Sprintf("GET http://files.test:%d/data.csv HTTP/1.1\r\nHost: files.test:%d\r\n\r\n", n.httpPort, n.httpPort))
	if !strings.HasPrefix(status, "403") || !strings.Contains(body, "byte limit") {
		t.Fatalf("after the limit: %s %q", status, body)
	}
}

func TestProxyConnectionLimit(t *testing.T) {
	t.Parallel()
	n := newTestNet(t, allowTest(true, func(p *Policy) { p.MaxConns = 2 }), nil)
	target := "tls.test:" + strconv.Itoa(n.tlsPort)
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", target)
		resp, err := http.ReadResponse(bufioReader(c), &http.Request{Method: "CONNECT"})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("tunnel %d: %v %v", i, resp, err)
		}
	}
	status, body := n.raw(t, "CONNECT "+target+" HTTP/1.1\r\n\r\n")
	if !strings.HasPrefix(status, "403") || !strings.Contains(body, "connection limit") {
		t.Fatalf("third tunnel: %s %q", status, body)
	}
}

func TestProxySlowloris(t *testing.T) {
	t.Parallel()
	const headTimeout = 300 * time.Millisecond
	n := newTestNet(t, allowTest(true, nil), func(o *Options) { o.HeadTimeout = headTimeout })
	var conns []net.Conn
	start := time.Now()
	for i := 0; i < 20; i++ {
		c, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		io.WriteString(c, "GET http://files.test/ HTTP/1.1\r\nHost: fi") // never finished
	}
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		if !strings.Contains(string(b), "408") {
			t.Fatalf("slow head answered %q", b)
		}
	}
	took := time.Since(start)
	t.Logf("20 slow heads cut after %s (head timeout %s)", took, headTimeout)
	if n.proxy.Stats().Active != 0 && took > 20*time.Second {
		t.Fatalf("connections still open: %+v", n.proxy.Stats())
	}
}

func TestProxyIdleTimeout(t *testing.T) {
	t.Parallel()
	const idle = 300 * time.Millisecond
	n := newTestNet(t, allowTest(true, nil), func(o *Options) { o.IdleTimeout = idle })
	c, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT tls.test:%d HTTP/1.1\r\n\r\n", n.tlsPort)
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	io.ReadAll(c) // the 200, then nothing until the proxy cuts the silent tunnel
	t.Logf("silent tunnel cut after %s (idle timeout %s)", time.Since(start), idle)
	r := n.record(t, "tls.test")
	if !strings.Contains(r.Err, "idle") {
		t.Fatalf("record %+v", r)
	}
}

// Close cuts tunnels whose server is silent and returns at once, instead of
// waiting for the idle timeout.
func TestProxyCloseCutsSilentTunnels(t *testing.T) {
	t.Parallel()
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	held := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			held <- c // accepted, never answered
		}
	}()
	defer func() {
		for len(held) > 0 {
			(<-held).Close()
		}
	}()
	port := srv.Addr().(*net.TCPAddr).Port
	n := newTestNetWith(t, Policy{Allow: []string{"silent.test:" + strconv.Itoa(port)}, CIDRs: []string{"127.0.0.0/8"}},
		map[string][]netip.Addr{"silent.test": {netip.MustParseAddr("127.0.0.1")}})
	c, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT silent.test:%d HTTP/1.1\r\n\r\n", port)
	if _, err := http.ReadResponse(bufioReader(c), &http.Request{Method: "CONNECT"}); err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "hello") // the client waits for an answer that never comes
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	n.proxy.Close()
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Close took %s", took)
	} else {
		t.Logf("Close took %s with a silent tunnel open", took)
	}
}
