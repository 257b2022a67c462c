package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/testkit/testnet"
)

// testSecret is the value the tests' rules add; a test that finds it anywhere
// the kernel or a log can see fails.
const testSecret = "s3cr3t-VALUE-4f1d9c"

// secretNet is a loopback test internet for interception: one TLS server
// answering for api.test, other.test and echo.test (certificates from a test
// CA), a proxy whose template has a secret rule for api.test, and what the
// server and the proxy saw.
type secretNet struct {
	proxy   *Proxy
	addr    string
	port    int
	ca      *CA         // the proxy's interception CA
	kernel  *tls.Config // trusts ca only, as a kernel's bundle would for api.test
	mu      sync.Mutex
	seen    []string // "host path auth" per request the server got
	records []Record
	logs    bytes.Buffer
}

func newSecretNet(t *testing.T, rules []SecretRule, mux func(*http.ServeMux), tune ...func(*Policy)) *secretNet {
	t.Helper()
	tca := testnet.NewCA(t)
	certFile, keyFile := tca.Issue(t, "api.test", "other.test", "echo.test")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	n := &secretNet{}
	m := http.NewServeMux()
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testSecret {
			http.Error(w, "401 no key", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "ok "+r.Host+" "+r.URL.Path)
	})
	m.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		// A host that reflects the request's headers (docs/network.md).
		r.Header.Write(w)
	})
	if mux != nil {
		mux(m)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		n.seen = append(n.seen, r.Host+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		n.mu.Unlock()
		m.ServeHTTP(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	n.port = portOf(t, srv.URL)
	pem, err := os.ReadFile(filepath.Join(tca.Dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	hostPort := "api.test:" + strconv.Itoa(n.port)
	for i := range rules {
		for j, h := range rules[i].Hosts {
			rules[i].Hosts[j] = strings.ReplaceAll(h, "PORT", strconv.Itoa(n.port))
		}
	}
	pol := Policy{Allow: []string{hostPort, "other.test:" + strconv.Itoa(n.port), "echo.test:" + strconv.Itoa(n.port)}, CIDRs: []string{"127.0.0.0/8"}}
	for _, f := range tune {
		f(&pol)
	}
	allow := mustCompile(t, pol)
	sec, err := CompileSecrets(rules, allow)
	if err != nil {
		t.Fatal(err)
	}
	if n.ca, err = NewCA(); err != nil {
		t.Fatal(err)
	}
	kroots := x509.NewCertPool()
	kroots.AppendCertsFromPEM(n.ca.CertPEM())
	kroots.AppendCertsFromPEM(pem) // other.test and echo.test pass untouched
	n.kernel = &tls.Config{RootCAs: kroots}
	lo := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	px, err := New(Options{
		Rules: allow.WithSecrets(sec), Session: "s1",
		TestHosts: map[string][]netip.Addr{"api.test": lo, "other.test": lo, "echo.test": lo},
		Intercept: &Intercept{CA: n.ca, UpstreamRoots: roots},
		OnRecord:  func(r Record) { n.mu.Lock(); n.records = append(n.records, r); n.mu.Unlock() },
		Logger:    slog.New(slog.NewTextHandler(&lockedWriter{w: &n.logs, mu: &n.mu}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	n.proxy, n.addr = px, serveLoopback(t, px)
	return n
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// vendorRule is the rule most tests use: Authorization for api.test, /v1/ and
// /echo paths, from the environment.
func vendorRule(t *testing.T) []SecretRule {
	t.Setenv("KB_TEST_VENDOR_KEY", testSecret)
	return []SecretRule{{Name: "vendor", Hosts: []string{"api.test:PORT"}, Paths: []string{"/v1/*", "/echo"},
		Header: "authorization", Value: "Bearer {secret}", FromEnv: "KB_TEST_VENDOR_KEY", Env: "VENDOR_KEY"}}
}

// client is an HTTP client through the proxy with the kernel's trust.
func (n *secretNet) client() *http.Client {
	pu, _ := url.Parse("http://" + n.addr)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(pu), TLSClientConfig: n.kernel.Clone(), ForceAttemptHTTP2: false,
	}}
}

func (n *secretNet) url(host, p string) string {
	return "https://" + host + ":" + strconv.Itoa(n.port) + p
}

func get(t *testing.T, c *http.Client, u string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// connect opens a CONNECT tunnel to host:port through the proxy and returns
// the raw connection.
func (n *secretNet) connect(t *testing.T, host string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	target := host + ":" + strconv.Itoa(n.port)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	return c
}

// noLeak fails when the secret is in the records, their notes or the log.
func (n *secretNet) noLeak(t *testing.T) {
	t.Helper()
	n.proxy.Settle(time.Second)
	n.mu.Lock()
	defer n.mu.Unlock()
	all := n.logs.String() + fmt.Sprintf("%+v %#v", n.records, n.records)
	for _, r := range n.records {
		all += r.String()
	}
	if strings.Contains(all, testSecret) || strings.Contains(all, "4f1d9c") {
		t.Fatalf("the secret is in the records or the log:\n%s", all)
	}
}

func TestInterceptAddsSecret(t *testing.T) {
	n := newSecretNet(t, vendorRule(t), nil)
	c := n.client()
	code, body := get(t, c, n.url("api.test", "/v1/items"))
	if code != 200 || body != "ok api.test:"+strconv.Itoa(n.port)+" /v1/items" {
		t.Fatalf("with the rule: %d %q", code, body)
	}
	// The placeholder an SDK sends is replaced; a path outside the rule gets
	// no secret (the host answers 401).
	if code, _ := get(t, c, n.url("api.test", "/v1/x"), "Authorization", "Bearer "+Placeholder("vendor")); code != 200 {
		t.Fatalf("placeholder: %d", code)
	}
	if code, _ := get(t, c, n.url("api.test", "/v2/items")); code != 401 {
		t.Fatalf("a path outside the rule: %d, want 401", code)
	}
	// A host without a rule is tunnelled untouched and gets no secret.
	if code, _ := get(t, c, n.url("other.test", "/v1/items")); code != 401 {
		t.Fatalf("other host: %d, want 401", code)
	}
	c.CloseIdleConnections()
	r := n.recordWith(t, "secret vendor: GET /v1/items 200")
	if r.Decision.Effect != Allow || !strings.Contains(r.String(), "secret vendor: GET /v1/x 200") {
		t.Fatalf("record: %s", r)
	}
	// Each use counts its own bytes on the wire, both ways.
	var sum [2]int64
	for _, u := range r.SecretUses {
		if u.Up <= 0 || u.Down <= 0 {
			t.Fatalf("a use without its bytes: %s", u)
		}
		sum[0], sum[1] = sum[0]+u.Up, sum[1]+u.Down
	}
	if sum[0] > r.Up || sum[1] > r.Down {
		t.Fatalf("the uses count %v, more than the connection's %d up, %d down", sum, r.Up, r.Down)
	}
	n.noLeak(t)
}

// recordWith waits for a record whose note holds s.
func (n *secretNet) recordWith(t *testing.T, s string) Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n.mu.Lock()
		for _, r := range n.records {
			if strings.Contains(r.String(), s) {
				n.mu.Unlock()
				return r
			}
		}
		n.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	t.Fatalf("no record with %q in %v", s, n.records)
	return Record{}
}

// After a request to the secret's host, a second request on the same kernel
// connection naming another host is refused and never reaches any host; a
// redirect from the secret's host to another allowed host is followed by the
// client on a new connection, without the secret.
// A host that reflects headers shows the kernel the secret on the paths the
// rule covers (the documented limit), and not on the others.
// Bodies stream both ways: a server-sent event arrives before the next is
// sent, a chunked upload's first chunk reaches the host before the second is
// written, and a slow host's answer comes through.
func TestInterceptStreams(t *testing.T) {
	gotChunk := make(chan string, 1)
	next := make(chan struct{})
	n := newSecretNet(t, vendorRule(t), func(m *http.ServeMux) {
		m.HandleFunc("/v1/events", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			<-next
			io.WriteString(w, "data: two\n\n")
		})
		m.HandleFunc("/v1/sized", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "8")
			io.WriteString(w, "one\n")
			w.(http.Flusher).Flush()
			<-next
			io.WriteString(w, "two\n")
		})
		m.HandleFunc("/v1/upload", func(w http.ResponseWriter, r *http.Request) {
			buf := make([]byte, 5)
			io.ReadFull(r.Body, buf)
			gotChunk <- string(buf)
			rest, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s%s", buf, rest)
		})
		m.HandleFunc("/v1/slow", func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(1500 * time.Millisecond)
			io.WriteString(w, "late")
		})
	})
	c := n.client()
	resp, err := c.Get(n.url("api.test", "/v1/events"))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event: %q %v", line, err)
	}
	next <- struct{}{}
	rest, _ := io.ReadAll(br)
	resp.Body.Close()
	if !strings.Contains(string(rest), "data: two") {
		t.Fatalf("second event: %q", rest)
	}
	// A body of a known length streams too (the proxy copies it with
	// asyncWriter.ReadFrom): its first part arrives before the rest is sent.
	resp, err = c.Get(n.url("api.test", "/v1/sized"))
	if err != nil {
		t.Fatal(err)
	}
	br = bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "one\n" {
		t.Fatalf("first part of a sized body: %q %v", line, err)
	}
	next <- struct{}{}
	if rest, _ := io.ReadAll(br); string(rest) != "two\n" {
		t.Fatalf("rest of a sized body: %q", rest)
	}
	resp.Body.Close()

	pr, pw := io.Pipe()
	done := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("POST", n.url("api.test", "/v1/upload"), pr)
		resp, err := c.Do(req)
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(b)
	}()
	pw.Write([]byte("first"))
	select {
	case s := <-gotChunk:
		if s != "first" {
			t.Fatalf("chunk %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the upload's first chunk did not reach the host before the second was written")
	}
	pw.Write([]byte("second"))
	pw.Close()
	if s := <-done; s != "firstsecond" {
		t.Fatalf("upload: %q", s)
	}
	if code, body := get(t, c, n.url("api.test", "/v1/slow")); code != 200 || body != "late" {
		t.Fatalf("slow: %d %q", code, body)
	}
	n.noLeak(t)
}

// 64 MiB down and up through the interception, both ways counted against the
// session's bytes (the 1 GiB run is TestInterceptNetns's).
func TestInterceptBulk(t *testing.T) {
	const size = 64 << 20
	n := newSecretNet(t, vendorRule(t), func(m *http.ServeMux) {
		m.HandleFunc("/v1/big", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(size))
			w.Write(make([]byte, size))
		})
		m.HandleFunc("/v1/sink", func(w http.ResponseWriter, r *http.Request) {
			k, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprint(w, k)
		})
	})
	c := n.client()
	resp, err := c.Get(n.url("api.test", "/v1/big"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := drain(resp.Body)
	resp.Body.Close()
	if err != nil || k != size {
		t.Fatalf("download: %d bytes, %v", k, err)
	}
	resp, err = c.Post(n.url("api.test", "/v1/sink"), "application/octet-stream", io.LimitReader(zeros{}, size))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != strconv.Itoa(size) {
		t.Fatalf("upload: the host got %q bytes", b)
	}
	c.CloseIdleConnections()
	r := n.recordWith(t, "secret vendor: POST /v1/sink 200")
	if r.Up < size || r.Down < size {
		t.Fatalf("record counts %d up, %d down", r.Up, r.Down)
	}
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// Reload reads the file again: the next request carries the new value; a
// file gone fails the reload and keeps the old value.
// Over plain HTTP a secret is added only when its rule says allow_plain_http;
// otherwise the request goes on as it came (the host answers 401).
// The allowlist's address rules hold before any interception: a secret's host
// that resolves to a private address without a cidrs entry is refused at the
// CONNECT, and nothing is sent to it.
// The session's byte limit holds through the interception: a download past it
// is cut and recorded with the rule.

// A WebSocket upgrade through the interception: the upgrade request gets the
// secret, the 101 comes back, and then bytes pass both ways untouched.
func TestInterceptUpgrade(t *testing.T) {
	n := newSecretNet(t, vendorRule(t), func(m *http.ServeMux) {
		m.HandleFunc("/v1/ws", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+testSecret || r.Header.Get("Upgrade") != "websocket" {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			c, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			buf := make([]byte, 4)
			if _, err := io.ReadFull(brw, buf); err == nil {
				c.Write(append([]byte("echo:"), buf...))
			}
		})
	})
	conn := n.connect(t, "api.test")
	tc := tls.Client(conn, &tls.Config{RootCAs: n.kernel.RootCAs, ServerName: "api.test"})
	fmt.Fprintf(tc, "GET /v1/ws HTTP/1.1\r\nHost: api.test:%d\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n\r\n", n.port)
	br := bufio.NewReader(tc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	io.WriteString(tc, "ping")
	got := make([]byte, 9)
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "echo:ping" {
		t.Fatalf("after the upgrade: %q %v", got, err)
	}
}
