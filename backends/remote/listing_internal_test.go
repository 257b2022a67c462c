package remote

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/executor"
)

// newUnlistingGateway is a gateway that, like Kernel Gateway and Enterprise Gateway
// by default, answers 403 to GET /api/kernels; with goodToken false it also refuses
// every other authenticated route, as a gateway does for a wrong token.
func newUnlistingGateway(t *testing.T, goodToken bool) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api":
			_, _ = w.Write([]byte(`{"version":"6.4.12"}`))
		case r.URL.Path == "/api/kernels" || !goodToken:
			http.Error(w, `{"reason":"Forbidden","message":"Forbidden"}`, http.StatusForbidden)
		case r.URL.Path == "/api/kernelspecs":
			_, _ = w.Write([]byte(`{"default":"python3","kernelspecs":{"python3":{"name":"python3","spec":{}}}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func TestGatewayThatDoesNotListKernels(t *testing.T) {
	t.Parallel()
	g := newUnlistingGateway(t, true)
	be, err := New(context.Background(), Options{Gateways: []Gateway{{URL: g.URL, Token: "tok"}}})
	require.NoError(t, err, "a 403 to GET /api/kernels alone is a gateway that does not list kernels, not a bad token")
	defer be.Close(context.Background())
	st := be.Gateways()[0]
	require.True(t, st.Healthy)
	require.Equal(t, -1, st.ServerKernels)
	p, err := be.Open(context.Background(), executor.SessionSpec{ID: "s", Dir: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, p.Close(context.Background()))
}

func TestGatewayThatRefusesTheToken(t *testing.T) {
	t.Parallel()
	g := newUnlistingGateway(t, false)
	_, err := New(context.Background(), Options{Gateways: []Gateway{{URL: g.URL, Token: "wrong"}}})
	require.ErrorIs(t, err, ErrTokenRejected)
	require.Contains(t, err.Error(), "/api/kernelspecs")
}
