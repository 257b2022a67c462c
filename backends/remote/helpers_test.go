package remote_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/backends/remote"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/jupyterproc"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// startGateway starts a real Jupyter Server on a loopback TCP port, with its own
// root directory (returned), stopped at the end of the test.
func startGateway(t testing.TB) (*jupyterproc.Server, string) {
	t.Helper()
	return startGatewayAt(t, t.TempDir())
}

// startGatewayAt starts a real Jupyter Server on root, as startGateway does: a
// second server on the same root is the same gateway restarted.
func startGatewayAt(t testing.TB, root string) (*jupyterproc.Server, string) {
	t.Helper()
	py := testenv.Jupyter(t)
	s, err := jupyterproc.Start(context.Background(), jupyterproc.Options{Python: py, RootDir: root, TCPAddr: "127.0.0.1:0"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	// The kernels' cwd is the root as the server resolves it.
	real, err := filepath.EvalSymlinks(root)
	require.NoError(t, err)
	return s, real
}

// requireSessionDir checks that dir is a directory of session id on the gateway
// rooted at root: kernelbox-sessions/<id>-<32 hex digits>.
func requireSessionDir(t testing.TB, root, id, dir string) {
	t.Helper()
	require.Equal(t, filepath.Join(root, "kernelbox-sessions"), filepath.Dir(dir), dir)
	require.Regexp(t, "^"+regexp.QuoteMeta(id)+"-[0-9a-f]{32}$", filepath.Base(dir))
}

// gw is the remote.Gateway of a test server.
func gw(s *jupyterproc.Server) remote.Gateway {
	ep := s.Endpoint()
	return remote.Gateway{URL: ep.URL, Token: ep.Token}
}

// newBackend builds a remote backend, closed at the end of the test.
func newBackend(t testing.TB, gws []remote.Gateway, mod func(*remote.Options)) *remote.Backend {
	t.Helper()
	o := remote.Options{Gateways: gws, HealthInterval: 200 * time.Millisecond, Logger: testLogger(t)}
	if mod != nil {
		mod(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := remote.New(ctx, o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })
	return b
}

// env is an executor on some backend with its own workspace; Data is a directory
// the policy lets inputs be read from.
type env struct {
	*executor.Executor
	WS   *workspace.Manager
	Data string
}

func newEnv(t testing.TB, b executor.Backend, mod func(*executor.Options)) *env {
	t.Helper()
	root := t.TempDir()
	data := filepath.Join(root, "data")
	require.NoError(t, os.MkdirAll(data, 0o755))
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(root, "ws")})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	opts := executor.Options{
		Backend:   b,
		Workspace: ws,
		Permissions: &permissions.Engine{
			Policy: permissions.DefaultPolicy(),
			Vars:   permissions.Vars{Workdir: data, Home: filepath.Join(root, "home"), Artifacts: ws.ArtifactsDir()},
		},
		InterruptGrace: 2 * time.Second,
		Logger:         testLogger(t),
		StartTimeout:   time.Minute,
	}
	if mod != nil {
		mod(&opts)
	}
	e, err := executor.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	return &env{Executor: e, WS: ws, Data: data}
}

func (e *env) run(t testing.TB, session, code string, inputs ...string) *api.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := e.Execute(ctx, api.Request{SessionID: session, Code: code, Inputs: inputs})
	require.NoError(t, err)
	return r
}

// ok fails the test unless r succeeded.
func ok(t testing.TB, r *api.Result) {
	t.Helper()
	require.Equal(t, api.StatusOK, r.Status, "error: %+v\nnotes: %v\nstderr: %s", r.Error, r.Notes, r.Stderr)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func fileSHA(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha(b)
}

// testLogger logs to the test's output when KERNELBOX_TEST_LOG=1.
func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("KERNELBOX_TEST_LOG") != "1" {
		return nil
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
