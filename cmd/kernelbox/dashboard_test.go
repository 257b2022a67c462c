package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/dashboard"
)

// apiCall sends one request as the dashboard page would (a JSON body with POST),
// with the given Authorization header value ("" for none), and returns the status.
func apiCall(t testing.TB, s *server, method, path, auth, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestDashboardNeedsToken: `kernelbox serve --token` serves the page shell to anyone
// (it carries no data) but refuses every API call the page makes without the token,
// or with a wrong one, and never writes the token into its log.
func TestDashboardNeedsToken(t *testing.T) {
	s := startServe(t)
	code, _ := s.get(t, "/v1/sessions/secret-session-name", true)
	require.Equal(t, http.StatusNotFound, code)
	st := apiCall(t, s, http.MethodPost, "/v1/sessions/secret-session-name/execute", "Bearer "+s.Token, `{"code":"x = 1"}`)
	require.Equal(t, http.StatusOK, st)

	resp, err := http.Get(s.URL + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, dashboard.ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))
	code, page := s.get(t, "/", false)
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, page, "secret-session-name", "the page shell carries no data")
	code, _ = s.get(t, "/ui/app.js", false)
	require.Equal(t, http.StatusOK, code)

	calls := []struct{ method, path string }{
		{"GET", "/v1/sessions"},
		{"GET", "/v1/sessions/secret-session-name"},
		{"GET", "/v1/sessions/secret-session-name/calls"},
		{"GET", "/v1/sessions/secret-session-name/artifacts"},
		{"GET", "/v1/artifacts/secret-session-name/plot.png"},
		{"GET", "/v1/calls/c1"},
		{"GET", "/v1/calls/c1/events"},
		{"POST", "/v1/calls/c1/cancel"},
		{"POST", "/v1/sessions/secret-session-name/execute"},
		{"POST", "/v1/sessions/secret-session-name/interrupt"},
		{"POST", "/v1/sessions/secret-session-name/reset"},
		{"DELETE", "/v1/sessions/secret-session-name"},
		{"POST", "/"},
		{"GET", "/metrics"},
	}
	for _, c := range calls {
		for _, auth := range []string{"", "Bearer wrong-token", "Bearer", s.Token, "Basic " + s.Token} {
			require.Equal(t, http.StatusUnauthorized, apiCall(t, s, c.method, c.path, auth, `{"code":"x = 2","detach":true}`), "%s %s with %q", c.method, c.path, auth)
		}
	}
	// The session survived all of that: nothing ran without the token.
	code, body := s.get(t, "/v1/sessions", true)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "secret-session-name")
	require.NotContains(t, s.log.String(), s.Token, "the token is in the server's log")
}

// TestDashboardLinkNeedsPage: `kernelbox dashboard` hands out no link to a server that
// serves no page (--no-dashboard): it says why and exits 1; with the page it prints
// the link.
func TestDashboardLinkNeedsPage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"with the page", nil, 0, "/#token=test-token-123"},
		{"no dashboard", []string{"--no-dashboard"}, 1, "serves no dashboard (it was started with --no-dashboard)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServeWith(t, serveOpts{token: "test-token-123", args: tc.args})
			out, code := cli(t, kernelboxBin(t), nil, "", "dashboard", "--server", s.URL, "--token", s.Token)
			require.Equal(t, tc.code, code, out)
			require.Contains(t, out, tc.want)
		})
	}
}
