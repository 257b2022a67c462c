package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/internal/jupyterproc"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// startServeRemote runs `kernelbox serve --backend remote` (with a token, as
// startServe does) against a real Jupyter Server on loopback TCP, whose root
// directory it returns.
func startServeRemote(t testing.TB) (*server, string) {
	t.Helper()
	py := testenv.Jupyter(t)
	root := t.TempDir()
	gw, err := jupyterproc.Start(context.Background(), jupyterproc.Options{Python: py, RootDir: root, TCPAddr: "127.0.0.1:0"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = gw.Stop(context.Background()) })
	s := startServeWith(t, serveOpts{
		token:   "test-token-123",
		backend: []string{"--backend", "remote", "--gateway", gw.Endpoint().URL},
		env:     []string{"KERNELBOX_GATEWAY_TOKEN=" + gw.Endpoint().Token},
	})
	return s, root
}

// TestServeUploadRSSBoundedRemote is TestServeUploadRSSBounded on the remote
// backend: the bytes go through the kernel (kernelfs, in chunks) into its
// session directory on the gateway and back, and serve's RSS stays bounded,
// whatever the size. The bound is higher than local's: chunks in flight (3 of 1
// MiB up, written to the socket as base64 as they go; 3 of 2 MiB down, each held
// as the reply and as decoded bytes), the connection's 1 MiB write buffer, and
// the heap Go lets grow to twice what is live. Measured over three 1 GiB rounds:
// 14.8 MB by the end of the first upload, 30 MB in all (47-57 MB before the
// chunks' base64 stopped being copied).
func TestServeUploadRSSBoundedRemote(t *testing.T) {
	s, _ := startServeRemote(t)
	serveThroughput(t, s, 96<<10, 32<<10)
}

// TestCpRoundTripRemote: `kernelbox cp` of a directory tree into a remote
// session (through the kernel) and back is byte-identical, and the kernel
// reads what was copied in.
func TestCpRoundTripRemote(t *testing.T) {
	s, _ := startServeRemote(t)
	src := filepath.Join(t.TempDir(), "tree")
	files := map[string][]byte{"a.txt": []byte("alpha"), "sub/b.bin": make([]byte, 3<<20+5), "sub/deep/c": {}}
	_, _ = rand.Read(files["sub/b.bin"])
	for name, b := range files {
		p := filepath.Join(src, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, b, 0o644))
	}
	code, out, errOut := kb(t, s, "cp", src, "rc:")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	r, _ := execCLITok(t, s.URL, s.Token, "rc", `import hashlib
open("tree/sub/deep/kernel.txt", "w").write("from the kernel")
hashlib.sha256(open("tree/sub/b.bin", "rb").read()).hexdigest()`)
	require.Equal(t, "ok", string(r.Status), "%+v", r.Error)
	sum := sha256.Sum256(files["sub/b.bin"])
	assert.Equal(t, "'"+hex.EncodeToString(sum[:])+"'", r.Result)

	code, out, errOut = kb(t, s, "ls", "rc:tree/sub")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "b.bin")
	back := t.TempDir()
	code, out, errOut = kb(t, s, "cp", "rc:tree", back)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	want := treeSums(t, src)
	want["sub/deep/kernel.txt"] = sha256.Sum256([]byte("from the kernel"))
	assert.Equal(t, want, treeSums(t, filepath.Join(back, "tree")))

	code, _, errOut = kb(t, s, "rm", "-r", "rc:tree/sub")
	require.Equal(t, 0, code, errOut)
	code, _, errOut = kb(t, s, "ls", "rc:tree/sub")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not_found")
	code, _, errOut = kb(t, s, "cp", "rc:../../etc/passwd", "-")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "invalid_path")
}
