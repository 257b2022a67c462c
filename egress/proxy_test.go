package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// testNet is a loopback test internet: an HTTP and an HTTPS server on 127.0.0.1,
// names mapped to them with TestHosts, and a proxy in front.
type testNet struct {
	proxy     *Proxy
	addr      string // the proxy's listening address
	httpPort  int
	tlsPort   int
	tlsServer *httptest.Server
	mu        sync.Mutex
	records   []Record
}

const bigBody = 1 << 20

func newTestNet(tb testing.TB, policy func(httpPort, tlsPort int) Policy, tune func(*Options)) *testNet {
	tb.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/data.csv", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "a,b\n1,2\n") })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, bigBody)) })
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "host=%s uri=%s body=%s", r.Host, r.RequestURI, b)
	})
	hs := httptest.NewServer(mux)
	tb.Cleanup(hs.Close)
	ts := httptest.NewTLSServer(mux)
	tb.Cleanup(ts.Close)
	n := &testNet{httpPort: portOf(tb, hs.URL), tlsPort: portOf(tb, ts.URL), tlsServer: ts}
	lo := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	rules := mustCompile(tb, policy(n.httpPort, n.tlsPort))
	o := Options{
		Rules: rules, Session: "s1",
		TestHosts: map[string][]netip.Addr{
			"files.test": lo, "tls.test": lo, "other.test": lo, "denied.test": lo,
			"rebind.test":   {netip.MustParseAddr("127.0.0.1")},
			"metadata.test": {netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("::ffff:169.254.169.254")},
		},
		OnRecord: func(r Record) { n.mu.Lock(); n.records = append(n.records, r); n.mu.Unlock() },
	}
	if tune != nil {
		tune(&o)
	}
	px, err := New(o)
	if err != nil {
		tb.Fatal(err)
	}
	n.proxy, n.addr = px, serveLoopback(tb, px)
	return n
}

// serveLoopback serves px on a loopback port until tb's cleanup closes it, and
// returns its address.
func serveLoopback(tb testing.TB, px *Proxy) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	tb.Cleanup(func() { px.Close(); <-done })
	go func() { defer close(done); px.Serve(ln) }()
	return ln.Addr().String()
}

func portOf(tb testing.TB, u string) int {
	tb.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		tb.Fatal(err)
	}
	p, _ := strconv.Atoi(pu.Port())
	return p
}

// record waits for the proxy to record a connection whose Host is host.
func (n *testNet) record(tb testing.TB, host string) Record {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		n.mu.Lock()
		for i := len(n.records) - 1; i >= 0; i-- {
			if n.records[i].Host == host {
				r := n.records[i]
				n.mu.Unlock()
				return r
			}
		}
		n.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatalf("no record for %s", host)
	return Record{}
}

// client is an HTTP client using the proxy, trusting the test TLS server.
func (n *testNet) client() *http.Client {
	pu, _ := url.Parse("http://" + n.addr)
	tr := n.tlsServer.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(pu)
	tr.TLSClientConfig.InsecureSkipVerify = true // the test certificate names example.com; SNI stays tls.test
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// allowTest is the usual policy: files.test and tls.test on the servers' ports,
// rebind.test too, with the loopback CIDR lifted as the test internet's range
// unless lift is false.
func allowTest(lift bool, mut func(*Policy)) func(httpPort, tlsPort int) Policy {
	return func(hp, tp int) Policy {
		p := Policy{Allow: []string{"files.test:" + strconv.Itoa(hp), "tls.test:" + strconv.Itoa(tp), "rebind.test:" + strconv.Itoa(hp), "metadata.test:80"}}
		if lift {
			p.CIDRs = []string{"127.0.0.0/8"}
		}
		if mut != nil {
			mut(&p)
		}
		return p
	}
}

func TestProxyAllowsPlainHTTPAndConnect(t *testing.T) {
	t.Parallel()
	n := newTestNet(t, allowTest(true, nil), nil)
	c := n.client()
	for _, u := range []string{
		fmt.Sprintf("http://files.test:%d/data.csv", n.httpPort),
		fmt.Sprintf("https://tls.test:%d/data.csv", n.tlsPort),
		fmt.Sprintf("http://FILES.test.:%d/data.csv", n.httpPort),
	} {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "a,b\n1,2\n" {
			t.Fatalf("GET %s: %d %q", u, resp.StatusCode, b)
		}
	}
	c.CloseIdleConnections()
	r := n.record(t, "tls.test")
	if r.Decision.Effect != Allow || r.Method != "CONNECT" || r.Addr.Addr() != netip.MustParseAddr("127.0.0.1") || r.Up == 0 || r.Down == 0 || r.Session != "s1" {
		t.Fatalf("CONNECT record: %+v", r)
	}
	r = n.record(t, "files.test")
	if r.Decision.Effect != Allow || r.Method != "GET" || r.Down == 0 || !strings.Contains(r.Decision.Rule, "cidr 127.0.0.0/8") {
		t.Fatalf("GET record: %+v", r)
	}
	t.Logf("records: %s", r)
}

// TestProxyPlainHTTPRequest checks that a plain-HTTP request reaches the server
// in origin form, with its body, and without proxy headers.
func TestProxyPlainHTTPRequest(t *testing.T) {
	t.Parallel()
	n := newTestNet(t, allowTest(true, nil), nil)
	resp, err := n.client().Post(fmt.Sprintf("http://files.test:%d/echo?q=1", n.httpPort), "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf("host=files.test:%d uri=/echo?q=1 body=hello", n.httpPort)
	if string(b) != want {
		t.Fatalf("got %q; want %q", b, want)
	}
}

// raw sends a request head to the proxy and returns the status line and body.
func (n *testNet) raw(tb testing.TB, req string) (string, string) {
	tb.Helper()
	c, err := net.DialTimeout("tcp", n.addr, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		tb.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		tb.Fatalf("read response to %q: %v", req, err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.Status, string(b)
}

func TestProxyRefuses(t *testing.T) {
	t.Parallel()
	n := newTestNet(t, allowTest(false, func(p *Policy) { p.CIDRs = []string{"127.0.0.1/32"} }), nil)
	hp, tp := strconv.Itoa(n.httpPort), strconv.Itoa(n.tlsPort)
	long := strings.Repeat("a", 9000)
	tests := []struct {
		name, req, status, rule string
	}{
		{"denied name", "CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n", "403", "default deny"},
		{"denied name plain", "GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n", "403", "default deny"},
		{"port not allowed", "CONNECT files.test:22 HTTP/1.1\r\n\r\n", "403", `allow "files.test:` + hp},
		{"dotted literal", "CONNECT 127.0.0.1:" + hp + " HTTP/1.1\r\n\r\n", "403", "ip literal"},
		{"decimal literal", "GET http://2130706433:" + hp + "/ HTTP/1.1\r\nHost: 2130706433:" + hp + "\r\n\r\n", "403", "ip literal"},
		{"octal literal", "CONNECT 0177.0.0.1:" + tp + " HTTP/1.1\r\n\r\n", "403", "ip literal"},
		{"hex literal", "CONNECT 0x7f000001:" + tp + " HTTP/1.1\r\n\r\n", "403", "ip literal"},
		{"ipv6 literal", "CONNECT [::1]:" + tp + " HTTP/1.1\r\n\r\n", "403", "ip literal"},
		{"mapped literal", "CONNECT [::ffff:127.0.0.1]:" + tp + " HTTP/1.1\r\n\r\n", "403", "ip literal"},
		{"metadata by name", "GET http://metadata.test/latest/meta-data/ HTTP/1.1\r\nHost: metadata.test\r\n\r\n", "403", "special range 169.254.0.0/16"},
		{"host header of another", "CONNECT files.test:" + hp + " HTTP/1.1\r\nHost: denied.test:" + hp + "\r\n\r\n", "403", "host mismatch"},
		{"plain host header of another", "GET http://files.test:" + hp + "/ HTTP/1.1\r\nHost: denied.test\r\n\r\n", "403", "host mismatch"},
		{"no host header", "GET http://files.test:" + hp + "/ HTTP/1.1\r\n\r\n", "403", "smuggling"},
		{"duplicate host", "GET http://files.test:" + hp + "/ HTTP/1.1\r\nHost: files.test:" + hp + "\r\nHost: denied.test\r\n\r\n", "403", "more than one Host"},
		{"bare LF", "GET http://files.test:" + hp + "/ HTTP/1.1\nHost: files.test\n\n", "403", "bare LF"},
		{"bare CR", "GET http://files.test:" + hp + "/ HTTP/1.1\r\nHost: files.test:" + hp + "\rX: y\r\n\r\n", "403", "bare CR"},
		{"folded", "GET http://files.test:" + hp + "/ HTTP/1.1\r\nHost: files.test:" + hp + "\r\n Host: denied.test\r\n\r\n", "403", "folded"},
		{"long line", "GET http://files.test:" + hp + "/" + long + " HTTP/1.1\r\n\r\n", "403", "over 8192 bytes"},
		{"cl and te", "POST http://files.test:" + hp + "/ HTTP/1.1\r\nHost: files.test:" + hp + "\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", "403", "Content-Length and Transfer-Encoding"},
		{"two cl", "POST http://files.test:" + hp + "/ HTTP/1.1\r\nHost: files.test:" + hp + "\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", "403", "more than one Content-Length"},
		{"https absolute", "GET https://tls.test:" + tp + "/ HTTP/1.1\r\nHost: tls.test\r\n\r\n", "403", "absolute http://"},
		{"origin form", "GET /etc/passwd HTTP/1.1\r\nHost: files.test\r\n\r\n", "403", "absolute http://"},
		{"two te", "POST http://files.test:" + hp + "/echo HTTP/1.1\r\nHost: files.test:" + hp + "\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "403", "more than one Transfer-Encoding"},
		{"xchunked", "POST http://files.test:" + hp + "/echo HTTP/1.1\r\nHost: files.test:" + hp + "\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", "403", `Transfer-Encoding "xchunked"`},
		{"te list", "POST http://files.test:" + hp + "/echo HTTP/1.1\r\nHost: files.test:" + hp + "\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", "403", "only chunked"},
		{"cl list", "POST http://files.test:" + hp + "/echo HTTP/1.1\r\nHost: files.test:" + hp + "\r\nContent-Length: 5, 5\r\n\r\nhello", "403", `Content-Length "5, 5"`},
		{"cl sign", "POST http://files.test:" + hp + "/echo HTTP/1.1\r\nHost: files.test:" + hp + "\r\nContent-Length: +5\r\n\r\nhello", "403", "not one decimal number"},
		{"fragment at", "GET http://files.test:" + hp + "#@denied.test/ HTTP/1.1\r\nHost: files.test:" + hp + "\r\n\r\n", "403", "holds a '#'"},
		{"fragment", "GET http://files.test:" + hp + "/a#b HTTP/1.1\r\nHost: files.test:" + hp + "\r\n\r\n", "403", "holds a '#'"},
		{"backslash", "GET http://files.test:" + hp + "\\@denied.test/ HTTP/1.1\r\nHost: files.test:" + hp + "\r\n\r\n", "403", "holds a '#'"},
		{"connect at", "CONNECT files.test@denied.test:" + tp + " HTTP/1.1\r\n\r\n", "403", "holds a '#'"},
		{"bad version", "GET http://files.test:" + hp + "/ HTTP/1.1\r\nHost: files.test:" + hp + "\r\nExpect: 100-continue\r\nContent-Length: x\r\n\r\n", "403", "not one decimal number"},
		{"userinfo", "GET http://files.test@denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n", "403", "holds a '#', '@'"},
	}
	t.Run("raw", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				status, body := n.raw(t, tt.req)
				if !strings.HasPrefix(status, tt.status) || !strings.Contains(body, tt.rule) {
					t.Fatalf("%q: %s %q; want %s naming %q", tt.req, status, body, tt.status, tt.rule)
				}
				if !strings.HasPrefix(body, "kernelbox egress proxy: refused by rule [") {
					t.Fatalf("body does not name the proxy: %q", body)
				}
			})
		}
	})
	t.Run("rebinding to loopback", func(t *testing.T) {
		// rebind.test is allowed by name but resolves to 127.0.0.1; only
		// 127.0.0.1/32 is lifted... so use a policy without any CIDR.
		m := newTestNet(t, allowTest(false, nil), nil)
		status, body := m.raw(t, "GET http://rebind.test:"+strconv.Itoa(m.httpPort)+"/data.csv HTTP/1.1\r\nHost: rebind.test:"+strconv.Itoa(m.httpPort)+"\r\n\r\n")
		if !strings.HasPrefix(status, "403") || !strings.Contains(body, "special range 127.0.0.0/8") {
			t.Fatalf("%s %q", status, body)
		}
		r := m.record(t, "rebind.test")
		if r.Decision.Effect != Deny || r.Addr.IsValid() || r.Up != 0 {
			t.Fatalf("rebinding record: %+v (nothing may be dialled)", r)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for n.proxy.Stats().Connections < int64(len(tests)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.records) != len(tests) {
		t.Fatalf("%d records for %d refusals", len(n.records), len(tests))
	}
	for _, r := range n.records {
		if r.Decision.Effect != Deny || r.Addr.IsValid() {
			t.Errorf("refusal recorded as %+v", r)
		}
	}
	if st := n.proxy.Stats(); st.Refused < int64(len(tests)) {
		t.Errorf("stats %+v", st)
	}
}

func TestRecordString(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		r    Record
		want string
	}{
		{Record{Decision: deny("request smuggling or bounds", "a line ends in a bare LF")}, "network: deny (no target read) (request smuggling or bounds): a line ends in a bare LF"},
		{Record{Host: "files.test", Port: 80, Decision: deny("default deny", "no allow entry matches files.test:80")}, "network: deny files.test:80 (default deny): no allow entry matches files.test:80"},
		{Record{Host: "files.test", Port: 80, Addr: netip.MustParseAddrPort("192.0.2.7:80"), Up: 10, Down: 20, Duration: 1500 * time.Microsecond, Decision: Decision{Effect: Allow}},
			"network: allow files.test:80 via 192.0.2.7:80, 10 B up, 20 B down, 2ms"},
	} {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("got  %q\nwant %q", got, tt.want)
		}
	}
}
