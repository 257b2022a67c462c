package filestamp_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/internal/filestamp"
)

// A stamp stays equal while nothing touches the file, and changes with a write
// that keeps the size and the mtime, a chmod, and a replacement by rename; a
// file changed just now is not settled, one changed long enough ago is.
func TestStamp(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("stamps read the ctime on Linux only")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(p, []byte("abc"), 0o644))
	stamp := func() filestamp.Stamp {
		t.Helper()
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		st, ok := filestamp.Of(fi)
		require.True(t, ok)
		return st
	}
	first := stamp()
	require.Equal(t, first, stamp())
	require.EqualValues(t, 3, first.Size())
	require.False(t, first.Settled(time.Now()), "just written")
	require.True(t, first.Settled(time.Now().Add(filestamp.RacyWindow+time.Second)))

	fi, err := os.Lstat(p)
	require.NoError(t, err)
	time.Sleep(10 * time.Millisecond) // past the ctime's granularity
	require.NoError(t, os.WriteFile(p, []byte("xyz"), 0o644))
	require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
	second := stamp()
	require.NotEqual(t, first, second, "same size and mtime, but written: the ctime moved")

	time.Sleep(10 * time.Millisecond)
	require.NoError(t, os.Chmod(p, 0o600))
	third := stamp()
	require.NotEqual(t, second, third, "chmod")

	other := filepath.Join(dir, "g")
	require.NoError(t, os.WriteFile(other, []byte("xyz"), 0o600))
	require.NoError(t, os.Rename(other, p))
	require.NotEqual(t, third, stamp(), "replaced by rename: another inode")
}
