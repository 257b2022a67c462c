package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A session's copy (a fork) is bounded by apparent size (a sparse file that takes
// no space counts in full), leaves out links, FIFOs and what Skip names, and never
// blocks on a FIFO.
func TestCopyTreeBounds(t *testing.T) {
	t.Parallel()
	m, err := New(Options{Root: t.TempDir()})
	require.NoError(t, err)
	defer m.Close()
	srcS, err := m.Open("src")
	require.NoError(t, err)
	dstS, err := m.Open("dst")
	require.NoError(t, err)
	src, dst := srcS.Dir(), dstS.Dir()
	require.NoError(t, os.MkdirAll(filepath.Join(src, "outputs", "deep"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "outputs", "deep", "a.txt"), []byte("hello"), 0o644))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(src, "link")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(src, "data"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "data", "d.csv"), []byte("x"), 0o644))
	skipData := func(rel string, _ fs.DirEntry) bool { return rel == "data" }

	done := make(chan error, 1)
	go func() { done <- m.CopyTree(srcS, dstS, CopyOptions{Limit: 1 << 20, Skip: skipData}) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("CopyTree blocked (on the FIFO?)")
	}
	b, err := os.ReadFile(filepath.Join(dst, "outputs", "deep", "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "hello", string(b))
	for _, name := range []string{"link", "fifo", "data"} {
		_, err := os.Lstat(filepath.Join(dst, name))
		require.True(t, errors.Is(err, os.ErrNotExist), "%s was copied: %v", name, err)
	}

	// A sparse file of 1 GiB takes no space but is over a 1 MiB limit.
	f, err := os.Create(filepath.Join(src, "sparse"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(1<<30))
	require.NoError(t, f.Close())
	other, err := m.Open("other")
	require.NoError(t, err)
	err = m.CopyTree(srcS, other, CopyOptions{Limit: 1 << 20})
	require.ErrorIs(t, err, ErrTooLarge, "a sparse 1 GiB file under a 1 MiB limit")
	t.Logf("refused: %v", err)
}
