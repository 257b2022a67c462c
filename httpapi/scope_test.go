package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/audit"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/jupyterapi"
	"github.com/kernelbox/kernelbox/tokens"
)

// TestRouteTableScoped walks the route table with scoped tokens, as
// TestRouteTableGuarded walks it with the admin token: a route the table
// keeps for the admin is 403 to every scoped token; a route whose session
// ("w1") is out of the token's reach answers 404 in the executor's words for
// a missing session, whatever the method; a route whose ops the scope lacks
// is 403; a scoped token is never taken for the admin token. The list of the
// admin's routes is pinned.
func TestRouteTableScoped(t *testing.T) {
	e, ws := noneExecutor(t)
	st, err := tokens.Open(t.TempDir(), tokens.Options{})
	require.NoError(t, err)
	al, err := audit.Open(t.TempDir()+"/audit.log", audit.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { al.Close() })
	var mounted, page counter
	o := httpapi.Options{Token: "tok", Hosts: httpapi.Hosts{Loopback: true}, Workspace: ws, MCP: &mounted, Metrics: &mounted, Dashboard: &page,
		Gateway: jupyterapi.New(e, jupyterapi.Options{}), Tokens: st, Audit: al}
	h := httpapi.New(e, o)
	_, elsewhere, err := st.Mint("elsewhere", tokens.Scope{Sessions: []string{"other-*"}}, 0)
	require.NoError(t, err)
	_, watcher, err := st.Mint("watcher", tokens.Scope{Sessions: []string{"w1"}, Ops: []tokens.Op{tokens.OpWatch}}, 0)
	require.NoError(t, err)

	serve := func(method, path, token string) *httptest.ResponseRecorder {
		var body io.Reader
		if method != http.MethodGet {
			body = strings.NewReader(`{}`)
		}
		r := httptest.NewRequest(method, "http://127.0.0.1:8700"+path, body)
		r.Header.Set("Authorization", "Bearer "+token)
		if body != nil {
			r.Header.Set("Content-Type", "application/json")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	var adminOnly []string
	routes := httpapi.Routes(o)
	for _, rt := range routes {
		method, _, _ := strings.Cut(rt.Pattern, " ")
		path := realPath(rt.Pattern)
		if !rt.Scoped {
			adminOnly = append(adminOnly, rt.Pattern)
			for _, tok := range []string{elsewhere, watcher} {
				w := serve(method, path, tok)
				assert.Equal(t, http.StatusForbidden, w.Code, "%s with a scoped token: %s", rt.Pattern, w.Body)
				assert.Equal(t, "permission_denied", errorCode(w), rt.Pattern)
				assert.Contains(t, w.Body.String(), "needs the admin token", rt.Pattern)
			}
			continue
		}
		switch rt.Target {
		case httpapi.PathID, httpapi.PathSession:
			w := serve(method, path, elsewhere)
			assert.Equal(t, http.StatusNotFound, w.Code, "%s out of reach: %s", rt.Pattern, w.Body)
			assert.JSONEq(t, `{"error":{"code":"not_found","message":"no such session \"w1\": not found"}}`, w.Body.String(), rt.Pattern)
		}
		w := serve(method, path, watcher)
		if len(rt.Ops) > 0 {
			assert.Equal(t, http.StatusForbidden, w.Code, "%s needs %v: %s", rt.Pattern, rt.Ops, w.Body)
		} else {
			assert.NotEqual(t, http.StatusForbidden, w.Code, "%s is a watcher's: %s", rt.Pattern, w.Body)
			assert.NotEqual(t, http.StatusUnauthorized, w.Code, rt.Pattern)
		}
	}
	assert.ElementsMatch(t, []string{
		"POST /v1/notebooks/run", "POST /v1/tokens", "GET /v1/tokens", "DELETE /v1/tokens/{token_id}",
		"GET /metrics", "POST /api/kernels",
	}, adminOnly, "the admin token's routes")
	// MCP's three routes ran for the watcher; /metrics never for a scoped token.
	assert.EqualValues(t, 3, mounted.n.Load())
	assert.Empty(t, e.Sessions(), "a refused request made a session")

	// The admin's token is the admin's only: a scoped secret is not it, nor
	// is the admin token a scoped one.
	w := serve("GET", "/v1/tokens", "tok")
	assert.Equal(t, http.StatusOK, w.Code)
	w = serve("GET", "/v1/token", "tok")
	assert.Contains(t, w.Body.String(), `"admin":true`)
	w = serve("GET", "/v1/token", watcher)
	assert.Contains(t, w.Body.String(), `"admin":false`)
	assert.NotContains(t, w.Body.String(), watcher, "the secret is never shown again")
}

// TestMintNeedsAServerToken: a server without a token (a unix socket) takes
// every request as the admin's, so it mints no scoped token.
func TestMintNeedsAServerToken(t *testing.T) {
	e, ws := noneExecutor(t)
	st, err := tokens.Open(t.TempDir(), tokens.Options{})
	require.NoError(t, err)
	h := httpapi.New(e, httpapi.Options{Workspace: ws, Tokens: st})
	r := httptest.NewRequest("POST", "/v1/tokens", strings.NewReader(`{"name":"a","sessions":["*"]}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	assert.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), "confine nothing")
	assert.Empty(t, st.List())
}
