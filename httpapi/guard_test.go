package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/workspace"
)

// noneExecutor is an executor without a backend ("none"): every call fails
// closed, so a request that got past the guard is answered by its handler
// without running anything.
func noneExecutor(t testing.TB) (*executor.Executor, *workspace.Manager) {
	t.Helper()
	ws, err := workspace.New(workspace.Options{Root: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	e, err := executor.New(executor.Options{Workspace: ws})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	return e, ws
}

// counter is a mounted handler (MCP, metrics, dashboard) that counts its runs.
type counter struct{ n atomic.Int64 }

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.n.Add(1) }

// TestGuardRefusesForeignHost repeats the rebinding request of issue 20: a Host
// that is not the loopback listener's own is refused on every path, token or not.
func TestGuardRefusesForeignHost(t *testing.T) {
	e, ws := noneExecutor(t)
	var ran counter
	g := httpapi.New(e, httpapi.Options{Token: "tok", Hosts: httpapi.Hosts{Loopback: true}, Workspace: ws, MCP: &ran, Metrics: &ran, Dashboard: &ran})
	paths := []string{"/v1/sessions", "/v1/sessions/r/execute", "/v1/calls/x", "/v1/artifacts/s/a", "/v1/notebooks/run", "/metrics", "/", "/mcp", "/healthz", "/ui/app.js", "/v1/sessions/r/files/a.txt", "/nowhere"}
	for _, p := range paths {
		for _, host := range []string{"rebind.attacker.example:8700", "rebind.attacker.example", "127.0.0.1.attacker.example", "evil"} {
			r := httptest.NewRequest("POST", p, strings.NewReader(`{"code":"1"}`))
			r.Host = host
			r.Header.Set("Authorization", "Bearer tok")
			r.Header.Set("Origin", "http://"+host)
			r.Header.Set("Sec-Fetch-Site", "same-origin")
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "forbidden_host") || !strings.Contains(w.Body.String(), "--allowed-host") {
				t.Errorf("%s Host %s: %d %s", p, host, w.Code, w.Body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:8700", "localhost:8700", "[::1]:8700", "127.3.4.5", "localhost", "LOCALHOST."} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.Host = host
		r.Header.Set("Authorization", "Bearer tok")
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Errorf("Host %s: %d %s", host, w.Code, w.Body)
		}
	}
	// Without the token: 401 except on the exempt routes; "/" is exact.
	for p, want := range map[string]int{"/v1/sessions": 401, "/metrics": 401, "/mcp": 401, "/healthz": 200, "/": 200, "/ui/a.js": 200, "/v1/": 401, "/nowhere": 401} {
		r := httptest.NewRequest("GET", p, nil)
		r.Host = "127.0.0.1:8700"
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("no token %s: %d, want %d: %s", p, w.Code, want, w.Body)
		}
	}
	if n := ran.n.Load(); n != 6+2 {
		t.Errorf("mounted handlers ran %d times, want 8", n)
	}
}
