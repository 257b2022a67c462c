package egress

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

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
		if err := s.rules[0].apply(req); err != nil {
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
