package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
	"github.com/kernelbox/kernelbox/tokens"
)

// TestScopedTokenCannotReviveAnotherTemplate: a session the server retired (closed
// idle here; lost at a restart alike) comes back with its own template when a
// call names none (its allowlist, secrets, limits). A token scoped to the default
// template whose session pattern reaches the id must not revive it that way: the
// template checked is the one the session would get, not the default. A token
// allowed that template may, and naming the default template explicitly is a new
// session of the default template.
func TestScopedTokenCannotReviveAnotherTemplate(t *testing.T) {
	t.Parallel() // its own executor; no kernel starts, nothing counted process-wide
	te := testexec.Local(t, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "net", Description: "the wider network", IdleTimeout: 300 * time.Millisecond}}
	})
	e, ws := te.Exec, te.WS
	st, err := tokens.Open(t.TempDir(), tokens.Options{})
	require.NoError(t, err)
	h := httpapi.New(e, httpapi.Options{Token: "tok", Hosts: httpapi.Hosts{Loopback: true}, Workspace: ws, Tokens: st})
	_, narrow, err := st.Mint("narrow", tokens.Scope{Sessions: []string{"r-*"}, Templates: []string{"default"}}, 0)
	require.NoError(t, err)
	_, wide, err := st.Mint("wide", tokens.Scope{Sessions: []string{"r-*"}, Templates: []string{"net"}}, 0)
	require.NoError(t, err)
	serve := func(method, path, token, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "http://127.0.0.1:8700"+path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	w := serve("POST", "/v1/sessions", "tok", `{"id": "r-1", "template": "net"}`)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	require.Eventually(t, func() bool { _, err := e.Session("r-1"); return err != nil }, 10*time.Second, 50*time.Millisecond,
		"the idle session is closed")
	require.Equal(t, "net", e.TemplateFor("r-1", ""), "retired with its template")

	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/sessions/r-1/execute", `{"code": "1"}`},
		{"POST", "/v1/sessions", `{"id": "r-1"}`},
	} {
		w = serve(c.method, c.path, narrow, c.body)
		assert.Equal(t, http.StatusForbidden, w.Code, "%s %s: %s", c.method, c.path, w.Body)
		assert.Contains(t, w.Body.String(), `may create sessions from the templates [default] only, not \"net\"`, c.path)
	}
	_, err = e.Session("r-1")
	require.Error(t, err, "nothing was created by the refused requests")
	require.Equal(t, "net", e.TemplateFor("r-1", ""), "the refusals did not take the retired entry")

	w = serve("POST", "/v1/sessions", wide, `{"id": "r-1"}`)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), `"template":"net"`)
}
