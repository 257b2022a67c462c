package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/audit"
	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/tokens"
)

// scopedHandler is executeHandler with scoped tokens and the audit log on,
// as serve runs, and the secret of a scoped token for every session. The
// store is told that session "s" exists, as it does after its first call.
func scopedHandler(tb testing.TB) (http.Handler, string) {
	reg := calls.New(instantRunner{}, calls.Options{})
	tb.Cleanup(func() { _ = reg.Close() })
	dir := tb.TempDir()
	st, err := tokens.Open(dir, tokens.Options{Exists: func(id string) bool { return id == "s" }})
	require.NoError(tb, err)
	al, err := audit.Open(filepath.Join(dir, "audit.log"), audit.Options{})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = al.Close() })
	_, secret, err := st.Mint("bench", tokens.Scope{Sessions: []string{"*"}}, 0)
	require.NoError(tb, err)
	return httpapi.New(nil, httpapi.Options{Token: "tok", Hosts: httpapi.Hosts{Loopback: true}, Calls: reg, Tokens: st, Audit: al}), secret
}

func serveExecuteAs(h http.Handler, token string, i int) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8700/v1/sessions/s/execute", strings.NewReader(`{"code": "x = `+strconv.Itoa(i)+`; x + 1"}`))
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// BenchmarkExecuteHandlerTokens is BenchmarkExecuteHandler with scoped
// tokens and the audit log on: the admin token, then a scoped token (its
// HMAC, scope, the session's owner, the rate, the audit line).
func BenchmarkExecuteHandlerTokens(b *testing.B) {
	h, secret := scopedHandler(b)
	for _, tc := range []struct{ name, token string }{{"admin", "tok"}, {"scoped", secret}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if w := serveExecuteAs(h, tc.token, i); w.Code != http.StatusOK {
					b.Fatal(w.Code, w.Body.String())
				}
			}
		})
	}
}
