package httpapi_test

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
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// TestFilesUploadOverQuota: with --disk-quota and session disks of their own
// (root), an upload past the session's disk is 507 quota and leaves no file,
// whole or partial; the kernel sees nothing, and a smaller one fits after.
func TestFilesUploadOverQuota(t *testing.T) {
	const quota = 32 << 20
	root := t.TempDir()
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(root, "ws"), DiskQuota: quota})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	if _, off := ws.DiskQuota(); off != "" {
		require.NotZero(t, os.Geteuid(), "as root sessions must get disks of their own: %s", off)
		t.Skip("no session disks without root: " + off)
	}
	b, err := localBackend(t)
	require.NoError(t, err)
	e, err := executor.New(executor.Options{
		Backend:   b,
		Workspace: ws,
		Permissions: &permissions.Engine{
			Policy: permissions.DefaultPolicy(),
			Vars:   permissions.Vars{Workdir: root, Home: filepath.Join(root, "home"), Artifacts: ws.ArtifactsDir()},
		},
		InterruptGrace: 2 * time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	srv := httptest.NewServer(httpapi.New(e, httpapi.Options{Token: "tok", Workspace: ws}))
	t.Cleanup(srv.Close)

	resp, body := raw(t, srv, http.MethodPut, "/v1/sessions/qq/files/inputs/big.bin", bytes.NewReader(make([]byte, 2*quota)))
	assert.Equal(t, http.StatusInsufficientStorage, resp.StatusCode, "%s", body)
	assert.Equal(t, api.CodeQuota, errCode(t, body))
	out := run(t, srv, "qq", `import os
print(sorted(n for d, _, fs in os.walk(".") for n in fs))`)
	assert.Equal(t, "[]", strings.TrimSpace(out), "no file, whole or partial, is left")
	resp, body = raw(t, srv, http.MethodPut, "/v1/sessions/qq/files/inputs/fits.bin", bytes.NewReader(make([]byte, quota/2)))
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
}
