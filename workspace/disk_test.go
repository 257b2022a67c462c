package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/workspace/internal/diskimage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// freeBytes is the space left for root on the file system holding dir.
func freeBytes(tb testing.TB, dir string) int64 {
	tb.Helper()
	var st unix.Statfs_t
	require.NoError(tb, unix.Statfs(dir, &st))
	return int64(st.Bfree) * st.Bsize
}

// fill writes 1 MiB blocks to path until the write fails or total bytes are
// written, and returns how many it wrote and the error that stopped it.
func fill(path string, total int64) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + 1) // not zeros: nothing may compress or skip them
	}
	var n int64
	for n < total {
		w, err := f.Write(buf)
		n += int64(w)
		if err != nil {
			return n, err
		}
	}
	return n, f.Sync()
}

// requireDisks fails the test when the manager did not get session disks while
// it could (running as root), and returns whether it did.
func requireDisks(tb testing.TB, m *Manager) bool {
	tb.Helper()
	limit, off := m.DiskQuota()
	require.NotZero(tb, limit)
	if os.Geteuid() == 0 {
		require.Empty(tb, off, "running as root, sessions must get a disk of their own")
		return true
	}
	require.NotEmpty(tb, off)
	return false
}

func TestDiskQuotaRefusesWritesPastIt(t *testing.T) {
	const quota = 64 << 20
	m := newManager(t, func(o *Options) { o.DiskQuota = quota; o.DirMode = 0o750 })
	s := openSession(t, m, "s1")
	fi, err := os.Stat(s.Dir())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o750), fi.Mode().Perm())
	assert.NoDirExists(t, filepath.Join(s.Dir(), "lost+found"))
	if !requireDisks(t, m) {
		// Without root the call-end check is the limit: it deletes the excess.
		n, err := fill(filepath.Join(s.Dir(), "outputs", "big"), 100<<20)
		require.NoError(t, err)
		require.EqualValues(t, 100<<20, n)
		err = s.EnforceDiskQuota()
		require.ErrorIs(t, err, ErrDiskQuota)
		assert.NoFileExists(t, filepath.Join(s.Dir(), "outputs", "big"))
		return
	}
	free := freeBytes(t, m.Root())
	n, err := fill(filepath.Join(s.Dir(), "outputs", "big"), 100<<20)
	require.ErrorIs(t, err, syscall.ENOSPC, "wrote %d bytes", n)
	assert.Less(t, n, int64(quota))
	// posix_fallocate of 5 GiB, as in the issue: refused outright.
	f, err := os.Create(filepath.Join(s.Dir(), "huge"))
	require.NoError(t, err)
	err = unix.Fallocate(int(f.Fd()), 0, 0, 5<<30)
	f.Close()
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.NoError(t, syncFS(s.Dir()))
	require.NoError(t, syncFS(m.Root()))
	img, err := os.Stat(filepath.Join(m.Root(), diskImagesDir, "s1.img"))
	require.NoError(t, err)
	lost := free - freeBytes(t, m.Root())
	t.Logf("host free space fell by %d bytes, the image holds %d, for a %d-byte quota (wrote %d)", lost, allocated(img), quota, n)
	assert.LessOrEqual(t, allocated(img), int64(quota))
	// Other processes share the host file system: some slack.
	assert.LessOrEqual(t, lost, int64(quota+16<<20))
	// The file system enforces it; the call-end check has nothing to do.
	require.NoError(t, s.EnforceDiskQuota())

	// Deleting gives the space back to the host (discard punches holes).
	require.NoError(t, os.Remove(filepath.Join(s.Dir(), "outputs", "big")))
	require.NoError(t, syncFS(s.Dir()))
	img, err = os.Stat(filepath.Join(m.Root(), diskImagesDir, "s1.img"))
	require.NoError(t, err)
	t.Logf("after deleting, the image holds %d bytes", allocated(img))
	assert.Less(t, allocated(img), int64(8<<20))

	// Remove unmounts the disk and deletes its image.
	require.NoError(t, s.Close())
	require.NoError(t, m.Remove("s1"))
	assert.Empty(t, diskimage.MountsBelow(filepath.Join(m.Root(), "sessions")))
	assert.NoFileExists(t, filepath.Join(m.Root(), diskImagesDir, "s1.img"))
}

// syncFS flushes the file system holding dir, so that freed blocks are
// discarded through the loop device.
func syncFS(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Syncfs(fd)
}

func TestDiskQuotaWarmAdopt(t *testing.T) {
	m := newManager(t, func(o *Options) { o.DiskQuota = 32 << 20 })
	if !requireDisks(t, m) {
		return
	}
	w, err := m.Warm()
	require.NoError(t, err)
	// A process working in the warm directory, as a warm kernel does.
	cwd, err := os.Open(w.Dir())
	require.NoError(t, err)
	defer cwd.Close()
	require.NoError(t, os.WriteFile(filepath.Join(w.Dir(), "before"), []byte("x"), 0o644))
	s, err := m.Adopt(w, "adopted")
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	assert.FileExists(t, filepath.Join(s.Dir(), "before"))
	assert.NoDirExists(t, w.Dir())
	// What the old handle writes lands on the same disk, at the new name.
	require.NoError(t, unix.Fchdir(int(cwd.Fd())))
	wd, _ := os.Getwd()
	t.Cleanup(func() { _ = os.Chdir(wd) })
	require.NoError(t, os.WriteFile("after", []byte("y"), 0o644))
	assert.FileExists(t, filepath.Join(s.Dir(), "after"))
	_, err = fill(filepath.Join(s.Dir(), "big"), 64<<20)
	require.ErrorIs(t, err, syscall.ENOSPC)
	assert.FileExists(t, filepath.Join(m.Root(), diskImagesDir, "adopted.img"))
	mounts := diskimage.MountsBelow(filepath.Join(m.Root(), "sessions"))
	require.Len(t, mounts, 1)
	assert.True(t, strings.HasSuffix(mounts[0], "/adopted"), mounts)
	require.NoError(t, m.Remove("adopted"))
	assert.Empty(t, diskimage.MountsBelow(filepath.Join(m.Root(), "sessions")))
}

func TestDiskQuotaSurvivesRestart(t *testing.T) {
	root := filepath.Join(t.TempDir(), "kb")
	m1, err := New(Options{Root: root, DiskQuota: 16 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { m1.Close() })
	if !requireDisks(t, m1) {
		return
	}
	s, err := m1.Open("kept")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(s.Dir(), "outputs", "f"), []byte("data"), 0o644))
	w, err := m1.Warm()
	require.NoError(t, err)
	// Neither they nor m1 are closed: a crash leaves their disks mounted. (Closed
	// once the second Manager is done, after its cleanup.)
	t.Cleanup(func() { s.Close(); w.Close() })
	require.Len(t, diskimage.MountsBelow(filepath.Join(root, "sessions")), 2)

	m2 := newManager(t, func(o *Options) { o.Root = root; o.DiskQuota = 16 << 20 })
	// The old mounts are gone, and the warm disk with them.
	assert.Empty(t, diskimage.MountsBelow(filepath.Join(root, "sessions")))
	names, _ := readNames(filepath.Join(root, diskImagesDir))
	assert.Equal(t, []string{"kept.img"}, names)
	// Reopening mounts the session's disk again, files and limit intact.
	s2 := openSession(t, m2, "kept")
	assert.Equal(t, "data", readFile(t, filepath.Join(s2.Dir(), "outputs", "f")))
	_, err = fill(filepath.Join(s2.Dir(), "big"), 32<<20)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.NoError(t, os.RemoveAll(filepath.Join(root, "sessions", w.ID())))
}

func TestDiskQuotaCloseUnmounts(t *testing.T) {
	root := filepath.Join(t.TempDir(), "kb")
	m, err := New(Options{Root: root, DiskQuota: 16 << 20})
	require.NoError(t, err)
	if !requireDisks(t, m) {
		require.NoError(t, m.Close())
		return
	}
	s, err := m.Open("s")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(s.Dir(), "outputs", "f"), []byte("data"), 0o644))
	img := filepath.Join(root, diskImagesDir, "s.img")
	// A second Session on the same directory keeps the disk mounted.
	s2, err := m.Open("s")
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Len(t, diskimage.MountsBelow(filepath.Join(root, "sessions")), 1)
	// Closing the last one unmounts it at once and lets its loop device go; the
	// image stays, and reopening mounts it again with its files.
	require.NoError(t, s2.Close())
	assert.Empty(t, diskimage.MountsBelow(filepath.Join(root, "sessions")))
	assert.FileExists(t, img)
	waitNoLoop(t, img)
	assert.Equal(t, []string{"s"}, m.KeptSessions())
	s, err = m.Open("s")
	require.NoError(t, err)
	assert.Empty(t, m.KeptSessions())
	require.Len(t, diskimage.MountsBelow(filepath.Join(root, "sessions")), 1)
	assert.Equal(t, "data", readFile(t, filepath.Join(s.Dir(), "outputs", "f")))
	// Close unmounts what is still open.
	require.NoError(t, m.Close())
	require.NoError(t, s.Close())
	assert.Empty(t, diskimage.MountsBelow(filepath.Join(root, "sessions")))
	waitNoLoop(t, img)
	// Nothing is left mounted, so the directory can be deleted as any other.
	require.NoError(t, os.RemoveAll(root))
}

// waitNoLoop waits until no loop device is backed by img: a lazy unmount
// frees the device once the last user lets go.
func waitNoLoop(tb testing.TB, img string) {
	tb.Helper()
	require.Eventually(tb, func() bool { _, held := diskimage.LoopOf(img); return !held }, 10*time.Second, 10*time.Millisecond,
		"a loop device still holds %s", img)
}

func TestEnforceDiskQuotaDeletesNewestFirst(t *testing.T) {
	m := newManager(t, nil)
	// Forced to the fallback, as without root.
	m.disks = &disks{size: 3 << 20, off: "test: no session disks"}
	s := openSession(t, m, "s1")
	old := filepath.Join(s.Dir(), "inputs", "old")
	_, err := fill(old, 2<<20)
	require.NoError(t, err)
	require.NoError(t, os.Chtimes(old, timeAgo(), timeAgo()))
	require.NoError(t, s.EnforceDiskQuota())
	_, err = fill(filepath.Join(s.Dir(), "outputs", "new"), 2<<20)
	require.NoError(t, err)
	err = s.EnforceDiskQuota()
	require.ErrorIs(t, err, ErrDiskQuota)
	assert.Contains(t, err.Error(), "outputs/new")
	assert.FileExists(t, old)
	assert.NoFileExists(t, filepath.Join(s.Dir(), "outputs", "new"))
	require.NoError(t, s.EnforceDiskQuota())
}

func timeAgo() time.Time { return time.Now().Add(-time.Hour) }
