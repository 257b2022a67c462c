package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/workspace"
	"github.com/stretchr/testify/require"
)

// A web page must not be able to make a browser run code on a kernelbox that listens
// on localhost without a token: cross-origin POSTs and non-JSON bodies are refused
// before anything runs (here the executor has no backend, so a call that got through
// would answer 503, not 403/415).
func TestCrossOriginRefused(t *testing.T) {
	ws, err := workspace.New(workspace.Options{Root: t.TempDir()})
	require.NoError(t, err)
	defer ws.Close()
	e, err := executor.New(executor.Options{Workspace: ws})
	require.NoError(t, err)
	defer e.Close()
	srv := httptest.NewServer(httpapi.New(e, httpapi.Options{Workspace: ws}))
	defer srv.Close()

	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    int
	}{
		{"form post from a page", map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"text/plain without origin", map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"json from another site", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"json from a program", map[string]string{"Content-Type": "application/json"}, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/sessions/a/execute", strings.NewReader(`{"code":"1"}`))
			require.NoError(t, err)
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, tc.want, resp.StatusCode)
		})
	}
}
