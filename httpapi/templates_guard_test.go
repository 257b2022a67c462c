package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/httpapi"
)

// TestTemplatesRoutesGuarded: the routes templates added (GET /v1/templates, POST
// /v1/sessions with a template) are refused to a foreign Host (DNS rebinding), even
// with the right token, and to a request without the token, before any handler runs
// (the handler here has no executor: reaching it would panic).
func TestTemplatesRoutesGuarded(t *testing.T) {
	h := httpapi.New(nil, httpapi.Options{Token: "tok", Hosts: httpapi.Hosts{Loopback: true}})
	for _, rt := range []struct{ method, path, body string }{
		{"GET", "/v1/templates", ""},
		{"POST", "/v1/sessions", `{"id": "t1", "template": "analyst"}`},
	} {
		r := httptest.NewRequest(rt.method, "http://attacker.example:8700"+rt.path, strings.NewReader(rt.body))
		r.Header.Set("Authorization", "Bearer tok")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Equal(t, http.StatusForbidden, w.Code, "%s %s with a foreign Host: %s", rt.method, rt.path, w.Body)
		require.Contains(t, w.Body.String(), "forbidden_host")

		r = httptest.NewRequest(rt.method, "http://127.0.0.1:8700"+rt.path, strings.NewReader(rt.body))
		w = httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Equal(t, http.StatusUnauthorized, w.Code, "%s %s without the token: %s", rt.method, rt.path, w.Body)
	}
}
