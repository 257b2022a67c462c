package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/backends/local"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testenv"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
	"github.com/stretchr/testify/require"
)

// env is an executor on the local backend with its own workspace and a policy whose
// workdir is Data (a temp dir the test can put input files in).
type env struct {
	*executor.Executor
	Backend *local.Backend
	WS      *workspace.Manager
	Data    string
	Home    string
}

func newEnv(t testing.TB, mod func(*executor.Options)) *env {
	t.Helper()
	py := testenv.Jupyter(t)
	b, err := local.New(local.Options{Python: py})
	require.NoError(t, err)
	e := newEnvOn(t, b, mod)
	e.Backend = b
	return e
}

// newEnvOn builds an env on any backend; the executor closes the backend.
func newEnvOn(t testing.TB, b executor.Backend, mod func(*executor.Options)) *env {
	t.Helper()
	root := t.TempDir()
	data := filepath.Join(root, "data")
	home := filepath.Join(root, "home")
	require.NoError(t, os.MkdirAll(data, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(root, "ws")})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	opts := executor.Options{
		Backend:   b,
		Workspace: ws,
		Permissions: &permissions.Engine{
			Policy: permissions.DefaultPolicy(),
			Vars:   permissions.Vars{Workdir: data, Home: home, Artifacts: ws.ArtifactsDir()},
		},
		InterruptGrace: 2 * time.Second,
	}
	if mod != nil {
		mod(&opts)
	}
	e, err := executor.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	return &env{Executor: e, WS: ws, Data: data, Home: home}
}

func (e *env) run(t testing.TB, session, code string) *executor.Result {
	t.Helper()
	r, err := e.Execute(context.Background(), executor.Request{SessionID: session, Code: code})
	require.NoError(t, err)
	return r
}
