package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/executor"
)

// Sessions are created with a template, keep it (409 with both names otherwise), and
// the templates are listed; every new route is behind the token.
func TestTemplatesHTTP(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	srv := callServer(t, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "analyst", Description: "preloaded", Preload: "x_pre = 41"}}
	}, calls.Options{})

	resp, b := do(t, srv, "GET", "/v1/templates", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	var tl struct{ Templates []api.TemplateInfo }
	require.NoError(t, json.Unmarshal(b, &tl))
	require.Len(t, tl.Templates, 2)
	require.Equal(t, "default", tl.Templates[0].Name)
	require.Equal(t, "analyst", tl.Templates[1].Name)
	require.True(t, tl.Templates[1].Preload)

	resp, b = do(t, srv, "POST", "/v1/sessions", `{"id": "t1", "template": "analyst"}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(b))
	resp, b = do(t, srv, "POST", "/v1/sessions", `{"id": "t1", "template": "analyst"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	resp, b = do(t, srv, "POST", "/v1/sessions", `{"id": "t1", "template": "default"}`)
	require.Equal(t, http.StatusConflict, resp.StatusCode, string(b))
	require.Contains(t, string(b), `"template_mismatch"`)
	require.Contains(t, string(b), `analyst`)

	resp, b = do(t, srv, "POST", "/v1/sessions/t1/execute", `{"code": "x_pre + 1"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	var res api.Result
	require.NoError(t, json.Unmarshal(b, &res))
	require.Equal(t, "42", res.Result, "the preload ran before the first call")
	resp, b = do(t, srv, "POST", "/v1/sessions/t1/execute", `{"code": "1", "template": "default"}`)
	require.Equal(t, http.StatusConflict, resp.StatusCode, string(b))

	resp, b = do(t, srv, "GET", "/v1/sessions", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(b), `"template":"analyst"`)

	for _, body := range []string{`{"id": "t2", "template": "nope"}`, `{"id": "", "template": "analyst"}`, `{"id": "t3", "extra": 1}`} {
		resp, b = do(t, srv, "POST", "/v1/sessions", body)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", body, string(b))
	}
	req, err := http.NewRequest("GET", srv.URL+"/v1/templates", nil)
	require.NoError(t, err)
	r, err := srv.Client().Do(req)
	require.NoError(t, err)
	r.Body.Close()
	require.Equal(t, http.StatusUnauthorized, r.StatusCode)
}
