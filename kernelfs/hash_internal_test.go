//go:build linux

package kernelfs

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHashLocalCache: a host file whose stamp has not changed since it was hashed is
// not read again; any change to it, even one keeping its size and mtime, is.
func TestHashLocalCache(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "inputs"), 0o755))
	path := filepath.Join(dir, "inputs", "a.csv")
	require.NoError(t, os.WriteFile(path, []byte("one"), 0o644))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	p := New(Options{MaxFileBytes: 1 << 20})

	// Fresh files are hashed on every call (their stamp cannot be trusted yet).
	_, err = p.hashLocal(root, "inputs/a.csv")
	require.NoError(t, err)
	require.Empty(t, p.hashed)

	time.Sleep(1100 * time.Millisecond)
	lf, err := p.hashLocal(root, "inputs/a.csv")
	require.NoError(t, err)
	require.Equal(t, sha256Hex("one"), lf.sha)
	require.Contains(t, p.hashed, "inputs/a.csv")

	// Poison the cache: an unchanged file must be answered from it, unread.
	h := p.hashed["inputs/a.csv"]
	h.sha = "cached"
	p.hashed["inputs/a.csv"] = h
	lf, err = p.hashLocal(root, "inputs/a.csv")
	require.NoError(t, err)
	require.Equal(t, "cached", lf.sha)

	// Rewritten in place with the same size and mtime: the ctime tells.
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte("two"), 0o644))
	require.NoError(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
	lf, err = p.hashLocal(root, "inputs/a.csv")
	require.NoError(t, err)
	require.Equal(t, sha256Hex("two"), lf.sha)
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
