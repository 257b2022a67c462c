package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/jupyterapi"
)

// allReserved is a connection reserve on which every request arrived.
type allReserved struct{ refused atomic.Int64 }

func (a *allReserved) Reserved(*http.Request) bool { return true }
func (a *allReserved) Refused()                    { a.refused.Add(1) }

// wildcard matches a wildcard of a ServeMux pattern.
var wildcard = regexp.MustCompile(`\{([A-Za-z_$]*)(\.\.\.)?\}`)

// realPath is a path a client would send to pattern's route: each wildcard
// filled with a plausible value ("{$}" with nothing).
func realPath(pattern string) string {
	_, p, _ := strings.Cut(pattern, " ")
	return wildcard.ReplaceAllStringFunc(p, func(w string) string {
		switch m := wildcard.FindStringSubmatch(w); {
		case m[1] == "$":
			return ""
		case m[2] != "":
			return "dir/a.txt"
		default:
			return "w1"
		}
	})
}

// errorCode is the code of an ErrorBody answer, or "".
func errorCode(w *httptest.ResponseRecorder) string {
	var b httpapi.ErrorBody
	_ = json.Unmarshal(w.Body.Bytes(), &b)
	return string(b.Error.Code)
}

// guardCodes are the codes only the guard answers with.
var guardCodes = []string{"forbidden_host", "unauthorized", "cross_origin", "too_many_connections"}

// TestRouteTableGuarded walks the route table (every route, every method it
// declares, a realistic path for its wildcards) and proves that each one
// refuses a foreign Host, a missing or wrong token (unless it is in the
// exemption list, which this test pins), a cross-site request that changes
// state, and, on a reserved connection, a request without the token (unless it
// is a probe) — before anything runs. A route added to the table later is
// walked too. Then the same requests, proper, reach their handlers.
func TestRouteTableGuarded(t *testing.T) {
	e, ws := noneExecutor(t)
	var mounted, page counter // the handlers of MCP and metrics; of the dashboard
	o := httpapi.Options{Token: "tok", Hosts: httpapi.Hosts{Loopback: true}, Workspace: ws, MCP: &mounted, Metrics: &mounted, Dashboard: &page,
		Gateway: jupyterapi.New(e, jupyterapi.Options{})}
	h := httpapi.New(e, o)
	var reserve allReserved
	ro := o
	ro.Reserve = &reserve
	hr := httpapi.New(e, ro)
	routes := httpapi.Routes(o)
	pinTable(t, routes)

	request := func(method, path string, rt httpapi.Route, mod func(r *http.Request)) *http.Request {
		body := io.Reader(nil)
		if method != http.MethodGet && method != http.MethodHead {
			body = strings.NewReader(`{}`)
		}
		r := httptest.NewRequest(method, "http://127.0.0.1:8700"+path, body)
		r.Header.Set("Authorization", "Bearer tok")
		if body != nil {
			r.Header.Set("Content-Type", "application/json")
		}
		if mod != nil {
			mod(r)
		}
		return r
	}
	serve := func(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	refusals, reserveRefusals := 0, int64(0)
	for _, rt := range routes {
		method, _, _ := strings.Cut(rt.Pattern, " ")
		path := realPath(rt.Pattern)
		methods := []string{method}
		if method == http.MethodGet {
			methods = append(methods, http.MethodHead)
		}
		t.Run(rt.Pattern, func(t *testing.T) {
			for _, m := range methods {
				for _, host := range []string{"rebind.attacker.example:8700", "127.0.0.1.attacker.example", "evil", ""} {
					w := serve(h, request(m, path, rt, func(r *http.Request) { r.Host = host }))
					assert.Equal(t, http.StatusForbidden, w.Code, "%s %s Host %q: %s", m, path, host, w.Body)
					assert.Equal(t, "forbidden_host", errorCode(w), "%s %s Host %q", m, path, host)
					refusals++
				}
				for _, auth := range []string{"", "Bearer wrong", "Bearer tok2", "Bearer  tok", "bearer tok", "Basic tok", "tok"} {
					w := serve(h, request(m, path, rt, func(r *http.Request) { r.Header.Set("Authorization", auth) }))
					if rt.Access != httpapi.NeedsToken {
						assert.NotEqual(t, http.StatusUnauthorized, w.Code, "%s %s is exempt", m, path)
						continue
					}
					assert.Equal(t, http.StatusUnauthorized, w.Code, "%s %s Authorization %q: %s", m, path, auth, w.Body)
					assert.Equal(t, "unauthorized", errorCode(w))
					assert.Contains(t, w.Header().Get("WWW-Authenticate"), "Bearer")
					refusals++
				}
				w := serve(hr, request(m, path, rt, func(r *http.Request) { r.Header.Del("Authorization") }))
				if rt.Access == httpapi.Probe {
					assert.NotEqual(t, http.StatusServiceUnavailable, w.Code, "%s %s is a probe: served in the reserve", m, path)
				} else {
					assert.Equal(t, http.StatusServiceUnavailable, w.Code, "%s %s without the token on a reserved connection: %s", m, path, w.Body)
					assert.Equal(t, "too_many_connections", errorCode(w))
					assert.Equal(t, "close", w.Header().Get("Connection"))
					refusals++
					reserveRefusals++
				}
			}
			// A cross-site request that changes state is refused on the route's
			// path whatever the method, declared or not: only GET and HEAD,
			// which change nothing, are not checked.
			for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
				for _, hdr := range []map[string]string{
					{"Sec-Fetch-Site": "cross-site"},
					{"Sec-Fetch-Site": "same-site"},
					{"Origin": "https://evil.example"},
					{"Origin": "http://127.0.0.1:8700.evil.example"},
					{"Origin": "null"},
				} {
					w := serve(h, request(m, path, rt, func(r *http.Request) {
						for k, v := range hdr {
							r.Header.Set(k, v)
						}
					}))
					assert.Equal(t, http.StatusForbidden, w.Code, "%s %s %v: %s", m, path, hdr, w.Body)
					assert.Equal(t, "cross_origin", errorCode(w), "%s %s %v", m, path, hdr)
					refusals++
				}
			}
			if rt.JSON {
				w := serve(h, request(method, path, rt, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }))
				assert.Equal(t, http.StatusUnsupportedMediaType, w.Code, "%s %s text/plain: %s", method, path, w.Body)
				refusals++
			}
		})
	}
	require.NotZero(t, refusals)
	assert.Zero(t, mounted.n.Load(), "a mounted handler ran for a refused request")
	assert.EqualValues(t, 2*2*7, page.n.Load(), "the dashboard's page and assets (GET and HEAD) ran for the 7 requests without a right token only")
	assert.Empty(t, e.Sessions(), "a refused request made a session")
	assert.Equal(t, reserveRefusals, reserve.refused.Load(), "every reserve refusal is counted")

	// The same requests, proper, reach their handlers.
	for _, rt := range routes {
		method, _, _ := strings.Cut(rt.Pattern, " ")
		path := realPath(rt.Pattern)
		for _, hh := range []http.Handler{h, hr} {
			w := serve(hh, request(method, path, rt, func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "same-origin") }))
			assert.NotContains(t, guardCodes, errorCode(w), "%s %s: %d %s", method, path, w.Code, w.Body)
			assert.NotEqual(t, http.StatusUnsupportedMediaType, w.Code, "%s %s", method, path)
		}
	}
	assert.EqualValues(t, 2*4, mounted.n.Load(), "the four routes of MCP and metrics reached their handlers")
	assert.EqualValues(t, 2*2*7+2*2, page.n.Load(), "the dashboard's two routes reached their handler")
}

// pinTable pins what the walk relies on: the one list of exemptions from the
// token, a body limit on every route but the streamed upload, JSON on every
// POST, and only the methods the walk knows.
func pinTable(t *testing.T, routes []httpapi.Route) {
	t.Helper()
	exempt := map[string]httpapi.Access{}
	unlimited := []string{}
	seen := map[string]bool{}
	for _, rt := range routes {
		require.False(t, seen[rt.Pattern], "%s is declared twice", rt.Pattern)
		seen[rt.Pattern] = true
		method, _, _ := strings.Cut(rt.Pattern, " ")
		require.Contains(t, []string{"GET", "POST", "PUT", "DELETE"}, method, rt.Pattern)
		if rt.Access != httpapi.NeedsToken {
			exempt[rt.Pattern] = rt.Access
		}
		if rt.MaxBody == httpapi.NoBodyLimit {
			unlimited = append(unlimited, rt.Pattern)
		} else {
			require.Positive(t, rt.MaxBody, rt.Pattern)
		}
		if method == "POST" {
			require.True(t, rt.JSON, "%s takes a POST body that is not JSON: a browser sends a cross-site form without asking", rt.Pattern)
		}
	}
	require.Equal(t, map[string]httpapi.Access{
		"GET /healthz":       httpapi.Probe,
		"GET /{$}":           httpapi.Public,
		"GET /ui/{asset...}": httpapi.Public,
	}, exempt, "the exemptions from the token")
	require.Equal(t, []string{"PUT /v1/sessions/{id}/files/{path...}"}, unlimited, "the routes without a body limit")
	for _, p := range []string{"POST /mcp", "GET /mcp", "DELETE /mcp", "GET /metrics", "POST /v1/sessions/{id}/execute",
		"POST /api/kernels", "GET /api/kernels/{id}/channels"} {
		require.True(t, seen[p], "%s is not in the table", p)
	}
}

// TestNoRoute: past the guard, a path no route matches is 404 and a method a
// path does not take is 405 with Allow, both as an ErrorBody; a path that is not
// clean is redirected to its clean form, except on the files routes, which see
// it as sent (and refuse what leaves the session).
func TestNoRoute(t *testing.T) {
	e, ws := noneExecutor(t)
	h := httpapi.New(e, httpapi.Options{Token: "tok", Workspace: ws})
	do := func(method, target string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, target, nil)
		r.Header.Set("Authorization", "Bearer tok")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := do("GET", "/v1/nowhere")
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Equal(t, "not_found", errorCode(w), w.Body.String())

	w = do("PUT", "/v1/templates")
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.Equal(t, "invalid_request", errorCode(w), w.Body.String())
	assert.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
	w = do("POST", "/v1/sessions/s1/files/a.txt")
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.Equal(t, "DELETE, GET, HEAD, PUT", w.Header().Get("Allow"))

	for target, want := range map[string]string{
		"/v1/sessions/../templates":    "/v1/templates",
		"/v1//sessions":                "/v1/sessions",
		"/v1/artifacts/s1/../../x.txt": "/v1/x.txt",
	} {
		w = do("GET", target)
		assert.Contains(t, []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect}, w.Code, "%s: %s", target, w.Body)
		assert.Equal(t, want, w.Header().Get("Location"), target)
	}
	// The files routes are not redirected: their handler gets the path as sent,
	// and refuses it.
	for _, target := range []string{"/v1/sessions/s1/files/../../../etc/passwd", "/v1/sessions/s1/files//etc/passwd", "/v1/sessions/s1/files/a/./b"} {
		w = do("PUT", target)
		assert.Equal(t, http.StatusBadRequest, w.Code, "%s: %s", target, w.Body)
		assert.Equal(t, "invalid_path", errorCode(w), "%s: %s", target, w.Body)
		assert.Empty(t, w.Header().Get("Location"), target)
	}
}
