//go:build linux

package diskimage

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImageLifecycle makes an image, mounts it, finds it full at its size,
// moves the mount with a bind, unmounts it and deletes it. It needs root: as
// another user New must say why images cannot be made.
func TestImageLifecycle(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	set, err := New(filepath.Join(base, "images"), 4<<20)
	if os.Geteuid() != 0 {
		require.Error(t, err, "images without root")
		return
	}
	require.NoError(t, err)
	fi, err := os.Stat(set.Dir())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	dir, moved := filepath.Join(base, "mnt"), filepath.Join(base, "moved")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Mkdir(moved, 0o755))
	require.NoError(t, set.Make("a"))
	require.Error(t, set.Make("a"), "an image is never made over another")
	require.NoError(t, set.Mount("a", dir))
	t.Cleanup(func() { _ = Unmount(dir); _ = Unmount(moved) })
	assert.Equal(t, []string{dir}, MountsBelow(base))
	dev, held := LoopOf(set.Path("a"))
	require.True(t, held)
	assert.Contains(t, dev, "/dev/loop")

	// Writing past the size fails inside the image, not on the host.
	big := make([]byte, 8<<20)
	err = os.WriteFile(filepath.Join(dir, "big"), big, 0o644)
	require.True(t, errors.Is(err, syscall.ENOSPC), "got %v", err)

	require.NoError(t, set.Rename("a", "b"))
	require.NoError(t, BindMount(dir, moved))
	require.NoError(t, Unmount(dir))
	assert.Equal(t, []string{moved}, MountsBelow(base))
	require.NoError(t, Unmount(moved))
	assert.Empty(t, MountsBelow(base))
	require.NoError(t, Unmount(moved), "nothing mounted is not an error")
	names, err := set.Names()
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, names)
	require.NoError(t, set.Remove("b"))
	require.NoError(t, set.Remove("b"), "a missing image is not an error")
	_, err = set.Stat("b")
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestUnescapeMountinfo(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "/a b/c\td", unescapeMountinfo(`/a\040b/c\011d`))
	assert.Equal(t, `/plain`, unescapeMountinfo(`/plain`))
	assert.Equal(t, `/odd\04`, unescapeMountinfo(`/odd\04`))
}
