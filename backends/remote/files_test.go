package remote_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/backends/remote"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/internal/testkit/filestest"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// filesServer is the HTTP API over an executor on the remote backend, on a real
// Jupyter Server; also returned is the gateway's root directory.
func filesServer(t testing.TB, mod func(*remote.Options)) (*httptest.Server, *env, string) {
	t.Helper()
	s, root := startGateway(t)
	e := newEnv(t, newBackend(t, []remote.Gateway{gw(s)}, mod), nil)
	srv := httptest.NewServer(httpapi.New(e.Executor, httpapi.Options{Token: "tok", Workspace: e.WS}))
	t.Cleanup(srv.Close)
	return srv, e, root
}

// target is srv as the files kit sees it: the kernel's session marker is a
// name the kit checks is never listed and always refused.
func target(srv *httptest.Server) *filestest.Server {
	return &filestest.Server{URL: srv.URL, Token: "tok", Client: srv.Client(), Reserved: []string{".kernelbox-session"}}
}

// TestRemoteFilesRoundTrip: on the remote backend, through the kernel
// (kernelfs), the files kit's round trip gives local's results (a CSV uploaded
// before the session exists is read by pandas, a PNG the kernel wrote downloads
// byte for byte, list, delete); the files are the kernel's, in its session
// directory on the gateway, none of them in the host session directory.
func TestRemoteFilesRoundTrip(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	srv, e, root := filesServer(t, nil)
	fs := target(srv)
	filestest.RoundTrip(t, fs, "rf")
	filestest.ListBounds(t, fs, "rf")
	fs.Upload(t, "rf", "inputs/here.txt", "on the gateway")
	dir := strings.TrimSpace(fs.Run(t, "rf", "import os; print(os.getcwd())"))
	requireSessionDir(t, root, "rf", dir)
	b, err := os.ReadFile(filepath.Join(dir, "inputs", "here.txt"))
	require.NoError(t, err)
	assert.Equal(t, "on the gateway", string(b))
	for _, p := range []string{"inputs/here.txt", "inputs/sub"} {
		_, err = os.Lstat(filepath.Join(e.WS.Root(), "sessions", "rf", filepath.FromSlash(p)))
		assert.ErrorIs(t, err, os.ErrNotExist, "%s: the uploads went to the kernel, not the host session directory", p)
	}
}

// TestRemoteFilesBadPaths: each bad path, and each link, FIFO or directory the
// kernel planted, is refused with the code a local session gives, and nothing
// outside the kernel's session directory is read or written (the files kit).
func TestRemoteFilesBadPaths(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	srv, _, _ := filesServer(t, nil)
	filestest.BadPaths(t, target(srv), "bad")
}

// TestRemoteFilesBatch: a batch of 5 with 2 bad files gives 3 ok and 2 named
// errors, on the remote backend as on local (the files kit).
func TestRemoteFilesBatch(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	srv, _, _ := filesServer(t, nil)
	filestest.Batch(t, target(srv), "bt")
}

// TestRemoteFilesBudget: with no disk quota a remote session is held to
// Sync.MaxSessionBytes: an upload over it is 507 quota and leaves no file, whole or
// partial, in the kernel; one that fits is written (the files kit's
// OverQuota); what the kernel's own code wrote counts too.
func TestRemoteFilesBudget(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	const budget = 4 << 20
	srv, _, _ := filesServer(t, func(o *remote.Options) { o.Sync.MaxSessionBytes = budget })
	fs := target(srv)
	filestest.OverQuota(t, fs, "qq", budget)
	fs.Run(t, "qq", "open('outputs/w.bin','wb').write(b'x' * 1_500_000)")
	resp, b := fs.Do(t, http.MethodPut, "/v1/sessions/qq/files/inputs/more.bin", bytes.NewReader(make([]byte, 1<<20)))
	assert.Equal(t, http.StatusInsufficientStorage, resp.StatusCode, "%s", b)
	assert.Equal(t, api.CodeQuota, filestest.Code(t, b))
	assert.Contains(t, string(b), "budget")
}

// TestRemoteFilesWorkspaceQuota: with the workspace's disk quota set, a remote
// session's budget is that quota, not Sync.MaxSessionBytes.
func TestRemoteFilesWorkspaceQuota(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	const quota = 8 << 20
	s, _ := startGateway(t)
	root := t.TempDir()
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(root, "ws"), DiskQuota: quota})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	e, err := executor.New(executor.Options{
		Backend:   newBackend(t, []remote.Gateway{gw(s)}, nil),
		Workspace: ws,
		Permissions: &permissions.Engine{
			Policy: permissions.DefaultPolicy(),
			Vars:   permissions.Vars{Workdir: root, Home: filepath.Join(root, "home"), Artifacts: ws.ArtifactsDir()},
		},
		InterruptGrace: 2 * time.Second,
		StartTimeout:   time.Minute,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	srv := httptest.NewServer(httpapi.New(e, httpapi.Options{Token: "tok", Workspace: ws}))
	t.Cleanup(srv.Close)
	filestest.OverQuota(t, target(srv), "wq", quota)
}
