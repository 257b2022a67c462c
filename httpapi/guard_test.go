package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kernelbox/kernelbox/httpapi"
)

// TestGuardRefusesForeignHost repeats the rebinding request of issue 20: a Host
// that is not the loopback listener's own is refused on every path, token or not.
func TestGuardRefusesForeignHost(t *testing.T) {
	ran := 0
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran++ })
	g := httpapi.Guard(httpapi.GuardOptions{Token: "tok", Loopback: true, Public: []string{"/healthz", "/", "/static/"}}, inner)
	paths := []string{"/v1/sessions", "/v1/sessions/r/execute", "/v1/calls/x", "/v1/artifacts/s/a", "/v1/notebooks/run", "/metrics", "/", "/mcp", "/healthz", "/static/app.js"}
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
		r := httptest.NewRequest("GET", "/v1/sessions", nil)
		r.Host = host
		r.Header.Set("Authorization", "Bearer tok")
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Errorf("Host %s: %d %s", host, w.Code, w.Body)
		}
	}
	// Without the token: 401 except on the public paths; "/" is exact.
	for p, want := range map[string]int{"/v1/sessions": 401, "/metrics": 401, "/mcp": 401, "/healthz": 200, "/": 200, "/static/a.js": 200, "/v1/": 401} {
		r := httptest.NewRequest("GET", p, nil)
		r.Host = "127.0.0.1:8700"
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("no token %s: %d, want %d", p, w.Code, want)
		}
	}
	if ran != 6+3 {
		t.Errorf("inner handler ran %d times, want 9", ran)
	}
}
