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

	"github.com/kernelbox/kernelbox/internal/testnet"
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

func TestInterceptRefuses(t *testing.T) {
	n := newSecretNet(t, vendorRule(t), nil)
	c := n.client()
	// The kernel's own credential for the rule's header: refused, not replaced.
	code, body := get(t, c, n.url("api.test", "/v1/items"), "Authorization", "Bearer mine")
	if code != 403 || !strings.Contains(body, "carries its own Authorization") {
		t.Fatalf("own credential: %d %q", code, body)
	}
	// Dot segments and encoded slashes, which the host might read as another
	// path than the rule's.
	for _, p := range []string{"/v1/../admin", "/v1/%2e%2e/admin", "/v1%2Fx", "/v1//x"} {
		conn := n.connect(t, "api.test")
		tc := tls.Client(conn, &tls.Config{RootCAs: n.kernel.RootCAs, ServerName: "api.test"})
		fmt.Fprintf(tc, "GET %s HTTP/1.1\r\nHost: api.test:%d\r\n\r\n", p, n.port)
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil || resp.StatusCode != 403 {
			t.Fatalf("%s: %v %v", p, resp, err)
		}
	}
	for _, tc := range []struct {
		name, sni, req, want string
	}{
		{"Host names another host", "api.test", "GET /v1/items HTTP/1.1\r\nHost: other.test:%d\r\n\r\n", "host mismatch"},
		{"absolute URI to another host", "api.test", "GET https://other.test:%d/v1/items HTTP/1.1\r\nHost: api.test\r\n\r\n", "host mismatch"},
		{"two Host headers", "api.test", "GET /v1/items HTTP/1.1\r\nHost: api.test:%d\r\nHost: other.test\r\n\r\n", "request smuggling"},
		{"HTTP/2 prior knowledge", "api.test", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n%d", "http/2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := n.connect(t, "api.test")
			tlc := tls.Client(conn, &tls.Config{RootCAs: n.kernel.RootCAs, ServerName: tc.sni})
			fmt.Fprintf(tlc, tc.req, n.port)
			resp, err := http.ReadResponse(bufio.NewReader(tlc), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode/100 != 4 || !strings.Contains(string(b), tc.want) {
				t.Fatalf("%d %q, want %q", resp.StatusCode, b, tc.want)
			}
		})
	}
	// SNI naming another host than the CONNECT: the handshake fails.
	conn := n.connect(t, "api.test")
	if err := tls.Client(conn, &tls.Config{RootCAs: n.kernel.RootCAs, ServerName: "other.test"}).Handshake(); err == nil {
		t.Fatal("SNI other.test on a CONNECT to api.test: handshake succeeded")
	}
	// h2 only: the proxy speaks HTTP/1.1 to the kernel and says so in ALPN.
	conn = n.connect(t, "api.test")
	if err := tls.Client(conn, &tls.Config{RootCAs: n.kernel.RootCAs, ServerName: "api.test", NextProtos: []string{"h2"}}).Handshake(); err == nil {
		t.Fatal("ALPN h2 only: handshake succeeded")
	}
	conn = n.connect(t, "api.test")
	tlc := tls.Client(conn, &tls.Config{RootCAs: n.kernel.RootCAs, ServerName: "api.test", NextProtos: []string{"h2", "http/1.1"}})
	if err := tlc.Handshake(); err != nil || tlc.ConnectionState().NegotiatedProtocol != "http/1.1" {
		t.Fatalf("ALPN h2, http/1.1: %v %q", err, tlc.ConnectionState().NegotiatedProtocol)
	}
	n.recordWith(t, "server name mismatch")
	n.noLeak(t)
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.seen {
		if strings.Contains(s, "other.test") || strings.Contains(s, "admin") {
			t.Fatalf("the host got %q", s)
		}
	}
}

// After a request to the secret's host, a second request on the same kernel
// connection naming another host is refused and never reaches any host; a
// redirect from the secret's host to another allowed host is followed by the
// client on a new connection, without the secret.
func TestInterceptSameConnectionAndRedirect(t *testing.T) {
	n := newSecretNet(t, vendorRule(t), func(m *http.ServeMux) {
		m.HandleFunc("/v1/redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://echo.test:"+r.URL.Query().Get("p")+"/echo", http.StatusFound)
		})
	})
	conn := n.connect(t, "api.test")
	tlc := tls.Client(conn, &tls.Config{RootCAs: n.kernel.RootCAs, ServerName: "api.test"})
	br := bufio.NewReader(tlc)
	fmt.Fprintf(tlc, "GET /v1/a HTTP/1.1\r\nHost: api.test:%d\r\n\r\nGET /v1/b HTTP/1.1\r\nHost: echo.test:%d\r\n\r\n", n.port, n.port)
	r1, err := http.ReadResponse(br, nil)
	if err != nil || r1.StatusCode != 200 {
		t.Fatalf("first: %v %v", r1, err)
	}
	io.ReadAll(r1.Body)
	r2, err := http.ReadResponse(br, nil)
	if err != nil || r2.StatusCode != 403 {
		t.Fatalf("second, to echo.test: %v %v", r2, err)
	}
	code, body := get(t, n.client(), n.url("api.test", "/v1/redirect?p="+strconv.Itoa(n.port)))
	if code != 200 || strings.Contains(strings.ToLower(body), "authorization") {
		t.Fatalf("redirect: %d %q", code, body)
	}
	n.mu.Lock()
	seen := strings.Join(n.seen, "\n")
	n.mu.Unlock()
	if strings.Contains(seen, "echo.test:"+strconv.Itoa(n.port)+" /v1/b") || !strings.Contains(seen+"\n", "echo.test:"+strconv.Itoa(n.port)+" /echo \n") {
		t.Fatalf("the host saw:\n%s", seen)
	}
	n.noLeak(t)
}

// A host that reflects headers shows the kernel the secret on the paths the
// rule covers (the documented limit), and not on the others.
func TestInterceptReflectingHost(t *testing.T) {
	rules := vendorRule(t)
	rules[0].Paths = []string{"/v1/*"}
	n := newSecretNet(t, rules, func(m *http.ServeMux) {
		m.HandleFunc("/v1/echo", func(w http.ResponseWriter, r *http.Request) { r.Header.Write(w) })
	})
	_, body := get(t, n.client(), n.url("api.test", "/echo"))
	if strings.Contains(body, testSecret) {
		t.Fatalf("outside the rule's paths the echo shows the secret: %q", body)
	}
	_, body = get(t, n.client(), n.url("api.test", "/v1/echo"))
	if !strings.Contains(body, testSecret) {
		t.Fatalf("the documented limit no longer holds (update docs/network.md): %q", body)
	}
}

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
	close(next)
	rest, _ := io.ReadAll(br)
	resp.Body.Close()
	if !strings.Contains(string(rest), "data: two") {
		t.Fatalf("second event: %q", rest)
	}

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
func TestSecretsReload(t *testing.T) {
	f := filepath.Join(t.TempDir(), "key")
	os.WriteFile(f, []byte("old\n"), 0o600)
	allow := mustCompile(t, Policy{Allow: []string{"api.test"}})
	s, err := CompileSecrets([]SecretRule{{Name: "k", Hosts: []string{"api.test"}, Value: "Bearer {secret}", FromFile: f}}, allow)
	if err != nil {
		t.Fatal(err)
	}
	value := func() string {
		req, _ := http.NewRequest("GET", "https://api.test/", nil)
		if err := s.rules[0].apply(req, Host{Name: "api.test"}); err != nil {
			t.Fatal(err)
		}
		return req.Header.Get("Authorization")
	}
	if v := value(); v != "Bearer old" {
		t.Fatalf("%q", v)
	}
	os.WriteFile(f, []byte("new\n"), 0o600)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if v := value(); v != "Bearer new" {
		t.Fatalf("after reload: %q", v)
	}
	os.Remove(f)
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), `secrets "k": from_file`) {
		t.Fatalf("reload of a missing file: %v", err)
	}
	if v := value(); v != "Bearer new" {
		t.Fatalf("after a failed reload: %q", v)
	}
}

func TestCompileSecretsRefuses(t *testing.T) {
	t.Setenv("KB_SET", "v")
	t.Setenv("KB_BAD", "a\nb")
	allow := mustCompile(t, Policy{Allow: []string{"api.test:443", "*.data.test", "plain.test:80"}})
	for _, tc := range []struct {
		name string
		r    SecretRule
		want string
	}{
		{"missing env", SecretRule{Name: "a", Hosts: []string{"api.test"}, FromEnv: "KB_NOT_SET_ANYWHERE"}, "KB_NOT_SET_ANYWHERE is not set in kernelbox's environment"},
		{"host not allowed", SecretRule{Name: "a", Hosts: []string{"evil.test"}, FromEnv: "KB_SET"}, "not in the template's network allowlist"},
		{"suffix wider than the allowlist", SecretRule{Name: "a", Hosts: []string{"*.other.test"}, FromEnv: "KB_SET"}, "not in the template's network allowlist"},
		{"plain http without allow_plain_http", SecretRule{Name: "a", Hosts: []string{"plain.test"}, FromEnv: "KB_SET"}, "port 443"},
		{"an address", SecretRule{Name: "a", Hosts: []string{"192.0.2.1"}, FromEnv: "KB_SET"}, "not an address"},
		{"two sources", SecretRule{Name: "a", Hosts: []string{"api.test"}, FromEnv: "KB_SET", FromFile: "/x"}, "exactly one"},
		{"no {secret}", SecretRule{Name: "a", Hosts: []string{"api.test"}, FromEnv: "KB_SET", Value: "Bearer"}, "{secret}"},
		{"newline in value", SecretRule{Name: "a", Hosts: []string{"api.test"}, FromEnv: "KB_BAD"}, "control character"},
		{"hop-by-hop header", SecretRule{Name: "a", Hosts: []string{"api.test"}, FromEnv: "KB_SET", Header: "Connection"}, "not a header"},
		{"bad path", SecretRule{Name: "a", Hosts: []string{"api.test"}, FromEnv: "KB_SET", Paths: []string{"/v1/../x"}}, "clean path"},
		{"sigv4 without keys", SecretRule{Name: "a", Kind: KindSigV4, Hosts: []string{"api.test"}, Region: "r"}, "needs access_key_from_env"},
		{"unknown kind", SecretRule{Name: "a", Kind: "basic", Hosts: []string{"api.test"}}, "kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CompileSecrets([]SecretRule{tc.r}, allow)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "a\nb") {
				t.Fatalf("the error shows the value: %v", err)
			}
		})
	}
	if _, err := CompileSecrets([]SecretRule{{Name: "ok", Hosts: []string{"plain.test"}, FromEnv: "KB_SET", AllowPlainHTTP: true}, {Name: "s", Hosts: []string{"x.data.test"}, FromEnv: "KB_SET"}}, allow); err == nil {
		t.Fatal("plain.test allows only port 80, so the rule's 443 is not allowed: want an error")
	}
	if _, err := CompileSecrets([]SecretRule{{Name: "s", Hosts: []string{"x.data.test", "*.y.data.test"}, FromEnv: "KB_SET"}}, allow); err != nil {
		t.Fatal(err)
	}
}

// Over plain HTTP a secret is added only when its rule says allow_plain_http;
// otherwise the request goes on as it came (the host answers 401).
func TestPlainHTTPSecret(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != testSecret {
			http.Error(w, "no key", http.StatusUnauthorized)
		}
	}))
	t.Cleanup(srv.Close)
	port := strconv.Itoa(portOf(t, srv.URL))
	t.Setenv("KB_TEST_PLAIN", testSecret)
	for _, plain := range []bool{true, false} {
		allow := mustCompile(t, Policy{Allow: []string{"plain.test:" + port}, CIDRs: []string{"127.0.0.0/8"}})
		sec, err := CompileSecrets([]SecretRule{{Name: "p", Hosts: []string{"plain.test:" + port}, Header: "X-Api-Key", FromEnv: "KB_TEST_PLAIN", AllowPlainHTTP: plain}}, allow)
		if err != nil {
			t.Fatal(err)
		}
		px, err := New(Options{Rules: allow.WithSecrets(sec), TestHosts: map[string][]netip.Addr{"plain.test": {netip.MustParseAddr("127.0.0.1")}}})
		if err != nil {
			t.Fatal(err)
		}
		pu, _ := url.Parse("http://" + serveLoopback(t, px))
		c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
		code, _ := get(t, c, "http://plain.test:"+port+"/x")
		if want := map[bool]int{true: 200, false: 401}[plain]; code != want {
			t.Fatalf("allow_plain_http %v: %d, want %d", plain, code, want)
		}
		c.CloseIdleConnections()
	}
}

// The allowlist's address rules hold before any interception: a secret's host
// that resolves to a private address without a cidrs entry is refused at the
// CONNECT, and nothing is sent to it.
func TestInterceptPrivateAddress(t *testing.T) {
	t.Setenv("KB_TEST_PRIV", testSecret)
	allow := mustCompile(t, Policy{Allow: []string{"api.test:443"}})
	sec, err := CompileSecrets([]SecretRule{{Name: "p", Hosts: []string{"api.test"}, FromEnv: "KB_TEST_PRIV"}}, allow)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	px, err := New(Options{Rules: allow.WithSecrets(sec), Intercept: &Intercept{CA: ca},
		TestHosts: map[string][]netip.Addr{"api.test": {netip.MustParseAddr("10.1.2.3")}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", serveLoopback(t, px))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(string(b), "special range 10.0.0.0/8") {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
}

// The session's byte limit holds through the interception: a download past it
// is cut and recorded with the rule.
func TestInterceptByteLimit(t *testing.T) {
	n := newSecretNet(t, vendorRule(t), func(m *http.ServeMux) {
		m.HandleFunc("/v1/big", func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, 8<<20)) })
	}, func(p *Policy) { p.MaxBytes = 1 << 20 })
	resp, err := n.client().Get(n.url("api.test", "/v1/big"))
	if err == nil {
		k, _ := drain(resp.Body)
		resp.Body.Close()
		if k >= 8<<20 {
			t.Fatalf("read %d bytes past a 1 MiB limit", k)
		}
	}
	n.recordWith(t, "(byte limit)")
}
