package remote_test

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/remote"
)

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "http://" + addr
}

func TestNewRejectsBadURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		gws  []remote.Gateway
		want string
	}{
		{"none", nil, "no gateway"},
		{"unparseable", []remote.Gateway{{URL: "http://[::1"}}, "missing ']'"},
		{"no scheme", []remote.Gateway{{URL: "127.0.0.1:8888"}}, "http"},
		{"ftp", []remote.Gateway{{URL: "ftp://example.com"}}, "want http:// or https://"},
		{"no host", []remote.Gateway{{URL: "http:///api"}}, "no host"},
		{"user info", []remote.Gateway{{URL: "http://me:secret@127.0.0.1:1"}}, "no user info"},
		{"query", []remote.Gateway{{URL: "http://127.0.0.1:1/?token=secret"}}, "no query"},
		{"twice", []remote.Gateway{{URL: "http://127.0.0.1:1"}, {URL: "http://127.0.0.1:1/"}}, "listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := remote.New(context.Background(), remote.Options{Gateways: tc.gws})
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "secret", "a URL's secrets must not be echoed")
		})
	}
	_, err := remote.New(context.Background(), remote.Options{
		Gateways:  []remote.Gateway{{URL: "http://127.0.0.1:1"}},
		KernelEnv: map[string]string{"A=B": "x"},
	})
	require.ErrorContains(t, err, "kernel env")
}

func TestNewWithUnreachableGateways(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	s, _ := startGateway(t)
	down := closedPort(t)

	// None reachable: New fails, naming each.
	_, err := remote.New(context.Background(), remote.Options{Gateways: []remote.Gateway{{URL: down}}})
	require.ErrorIs(t, err, remote.ErrNoGateway)
	require.ErrorContains(t, err, down)
	require.ErrorContains(t, err, "connection refused")

	// One of two reachable: New succeeds; the other starts out of the rotation and
	// every session goes to the live one.
	b := newBackend(t, []remote.Gateway{{URL: down}, gw(s)}, nil)
	st := b.Gateways()
	require.False(t, st[0].Healthy)
	require.Contains(t, st[0].Error, "connection refused")
	require.True(t, st[1].Healthy)
	e := newEnv(t, b, nil)
	ok(t, e.run(t, "a", "1"))
	ok(t, e.run(t, "b", "1"))
	require.Equal(t, 2, b.Gateways()[1].Sessions)
}

func TestWrongToken(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	s, _ := startGateway(t)
	for _, token := range []string{"wrong", ""} {
		_, err := remote.New(context.Background(), remote.Options{Gateways: []remote.Gateway{{URL: s.Endpoint().URL, Token: token}}})
		require.ErrorIs(t, err, remote.ErrTokenRejected)
		require.ErrorContains(t, err, "403 Forbidden")
		require.ErrorContains(t, err, "--gateway-token")
	}
}

func TestUnknownKernelName(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	s, _ := startGateway(t)
	_, err := remote.New(context.Background(), remote.Options{Gateways: []remote.Gateway{gw(s)}, KernelName: "julia-9"})
	require.ErrorContains(t, err, `no kernelspec "julia-9"`)
	require.ErrorContains(t, err, "kernelbox-python3")
}

func TestOutputLimitsAndLinks(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	s, _ := startGateway(t)
	b := newBackend(t, []remote.Gateway{gw(s)}, func(o *remote.Options) { o.Sync.MaxFileBytes = 1 << 20 })
	e := newEnv(t, b, nil)
	r := e.run(t, "lim", strings.Join([]string{
		"import os",
		"open('outputs/big.bin','wb').write(os.urandom(2<<20))",
		"open('outputs/ok.txt','w').write('fine')",
		"open('/tmp/kernelbox-remote-secret.txt','w').write('secret')",
		"os.symlink('/tmp/kernelbox-remote-secret.txt', 'outputs/link.txt')",
		"os.symlink('ok.txt', 'outputs/inner-link.txt')",
		"os.mkfifo('outputs/fifo')",
	}, "\n"))
	ok(t, r)
	var names []string
	for _, a := range r.Artifacts {
		names = append(names, a.Name)
	}
	require.Equal(t, []string{"ok.txt"}, names, "notes: %v", r.Notes)
	notes := strings.Join(r.Notes, "\n")
	require.Contains(t, notes, "outputs/big.bin is 2097152 bytes, over the remote backend's limit of 1048576 bytes per file; not collected")
	entries, err := os.ReadDir(filepath.Join(e.WS.Root(), "sessions", "lim", "outputs"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "only ok.txt reaches the host")

	// The skipped file is reported once per version, not on every call.
	r = e.run(t, "lim", "1")
	ok(t, r)
	require.NotContains(t, strings.Join(r.Notes, "\n"), "big.bin")
	r = e.run(t, "lim", "open('outputs/big.bin','ab').write(b'more')")
	ok(t, r)
	require.Contains(t, strings.Join(r.Notes, "\n"), "outputs/big.bin is 2097156 bytes")
}

func TestHostRejectsEscapingNames(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	s, _ := startGateway(t)
	b := newBackend(t, []remote.Gateway{gw(s)}, nil)
	e := newEnv(t, b, nil)
	ok(t, e.run(t, "esc", "1"))
	// Code in the kernel can replace the file-sync module's listing: the host must
	// not trust the names it gets.
	r := e.run(t, "esc", strings.Join([]string{
		"import sys",
		"m = [v for k, v in sys.modules.items() if k.startswith('_kernelbox_sync_')][0]",
		"open('outputs/real.txt','w').write('x')",
		"st = list(__import__('os').stat('outputs/real.txt'))",
		"bad = ['../escape.txt', '/abs.txt', 'a/../../b.txt', 'a//b', '.', 'x\\x00y']",
		"m._scan = lambda maxn, maxdepth: (sorted([[n, 1, 1, 1, 1] for n in bad]), [], False)",
	}, "\n"))
	ok(t, r)
	require.Empty(t, r.Artifacts)
	notes := strings.Join(r.Notes, "\n")
	for _, n := range []string{"../escape.txt", "/abs.txt", "a/../../b.txt", "a//b"} {
		require.Contains(t, notes, n)
	}
	require.Contains(t, notes, "not a plain relative path")
	_, err := os.Stat(filepath.Join(e.WS.Root(), "sessions", "escape.txt"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestTLSGateway(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	s, root := startGateway(t)
	target, err := url.Parse(s.Endpoint().URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	ts := httptest.NewTLSServer(proxy)
	t.Cleanup(ts.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o644))
	g := remote.Gateway{URL: ts.URL, Token: s.Endpoint().Token}

	// Without the CA, the certificate is refused.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = remote.New(ctx, remote.Options{Gateways: []remote.Gateway{g}})
	require.ErrorIs(t, err, remote.ErrNoGateway)
	require.ErrorContains(t, err, "certificate")

	// With it, REST and WebSocket go over TLS.
	b := newBackend(t, []remote.Gateway{g}, func(o *remote.Options) { o.CACertFile = ca })
	e := newEnv(t, b, nil)
	dir, _ := cwd(t, e, "tls")
	requireSessionDir(t, root, "tls", dir)
	r := e.run(t, "tls", "open('outputs/o.txt','w').write('over tls')")
	ok(t, r)
	require.Len(t, r.Artifacts, 1)
	_ = http.StatusOK
}
