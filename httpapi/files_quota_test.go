package httpapi_test

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/internal/testkit/filestest"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// filesServerOn serves an executor on the backend newBackend makes, over a
// workspace of its own with the disk quota given (0: none), for the files kit.
func filesServerOn(t *testing.T, quota int64, newBackend func(testing.TB) executor.Backend) (*filestest.Server, *workspace.Manager) {
	t.Helper()
	root := t.TempDir()
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(root, "ws"), DiskQuota: quota})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	e, err := executor.New(executor.Options{
		Backend:   newBackend(t),
		Workspace: ws,
		Permissions: &permissions.Engine{
			Policy: permissions.DefaultPolicy(),
			Vars:   permissions.Vars{Workdir: root, Home: filepath.Join(root, "home"), Artifacts: ws.ArtifactsDir()},
		},
		InterruptGrace: 2 * time.Second,
		StartTimeout:   2 * time.Minute,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	srv := httptest.NewServer(httpapi.New(e, httpapi.Options{Token: "tok", Workspace: ws}))
	t.Cleanup(srv.Close)
	return filesTarget(srv), ws
}

// TestFilesUploadOverQuota: with --disk-quota and session disks of their own
// (root), an upload past the session's disk is 507 quota and leaves no file,
// whole or partial; the kernel sees nothing, and a smaller one fits after
// (filestest.OverQuota), on local and docker.
func TestFilesUploadOverQuota(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	const quota = 32 << 20
	for name, newBackend := range map[string]func(testing.TB) executor.Backend{"local": testexec.LocalBackend, "docker": testexec.DockerBackend} {
		t.Run(name, func(t *testing.T) {
			fs, ws := filesServerOn(t, quota, newBackend)
			if _, off := ws.DiskQuota(); off != "" {
				require.NotZero(t, os.Geteuid(), "as root sessions must get disks of their own: %s", off)
				t.Skip("no session disks without root: " + off)
			}
			filestest.OverQuota(t, fs, "qq", quota)
		})
	}
}
