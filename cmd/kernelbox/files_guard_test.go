package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The session files routes sit behind serve's one guard like every other route: a
// foreign Host (DNS rebinding) is refused before the token is looked at, a missing
// or wrong token is 401, and nothing is written either way; a path that leaves the
// session (even one serve's mux would clean first) is invalid_path.
func TestServeFilesGuarded(t *testing.T) {
	s := startServe(t)
	do := func(method, path, host, token, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const file = "/v1/sessions/g/files/in.csv"
	for _, host := range []string{"rebind.attacker.example", "evil:8700"} {
		code, body := do("PUT", file, host, s.Token, "a,b\n")
		assert.Equal(t, http.StatusForbidden, code, body)
		assert.Contains(t, body, "forbidden_host")
		code, body = do("GET", "/v1/sessions/g/files?path=", host, s.Token, "")
		assert.Equal(t, http.StatusForbidden, code, body)
	}
	for _, tok := range []string{"", "wrong"} {
		code, body := do("PUT", file, "", tok, "a,b\n")
		assert.Equal(t, http.StatusUnauthorized, code, body)
	}
	code, body := do("GET", file, "", s.Token, "")
	assert.Equal(t, http.StatusNotFound, code, "nothing was written by the refused uploads: %s", body)

	for _, p := range []string{"/v1/sessions/g/files/../../../etc/passwd", "/v1/sessions/g/files/%2e%2e/x", "/v1/sessions/g/files//etc/passwd"} {
		code, body := do("PUT", p, "", s.Token, "x")
		assert.Equal(t, http.StatusBadRequest, code, "%s: %s", p, body)
		assert.Contains(t, body, "invalid_path", p)
	}
	code, body = do("PUT", file, "", s.Token, "a,b\n")
	require.Equal(t, http.StatusCreated, code, body)
	code, body = do("GET", file, "", s.Token, "")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "a,b\n", body)
}
