package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/workspace/internal/diskimage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKeptSessionsBounded: closed session directories are kept up to
// MaxKeptSessions, the one closed longest ago deleted first (image and files,
// not artifacts); reopening a kept one takes it off the list with its files, an
// evicted one starts empty and says so. Run with disks (as root) and with the
// check-only quota.
func TestKeptSessionsBounded(t *testing.T) {
	for _, checkOnly := range []bool{false, true} {
		t.Run(map[bool]string{false: "disks", true: "check-only"}[checkOnly], func(t *testing.T) {
			m := newManager(t, func(o *Options) { o.DiskQuota = 16 << 20; o.DiskQuotaCheckOnly = checkOnly; o.MaxKeptSessions = 2 })
			disks := !checkOnly && requireDisks(t, m)
			sessions := filepath.Join(m.Root(), "sessions")
			for _, id := range []string{"a", "b", "c"} {
				s, err := m.Open(id)
				require.NoError(t, err)
				writeFile(t, filepath.Join(s.Dir(), "outputs", "f"), id)
				_, err = s.SaveDisplay("d.txt", []byte(id), "")
				require.NoError(t, err)
				require.NoError(t, s.Close())
				assert.Empty(t, diskimage.MountsBelow(sessions))
			}
			assert.Equal(t, []string{"b", "c"}, m.KeptSessions())
			assert.NoDirExists(t, filepath.Join(sessions, "a"))
			assert.FileExists(t, filepath.Join(m.ArtifactsDir(), "a", "display", "d.txt"), "artifacts stay")
			if disks {
				names, _ := readNames(filepath.Join(m.Root(), diskImagesDir))
				assert.ElementsMatch(t, []string{"b.img", "c.img"}, names)
			}
			b := openSession(t, m, "b")
			assert.False(t, b.Evicted())
			assert.Equal(t, "b", readFile(t, filepath.Join(b.Dir(), "outputs", "f")))
			assert.Equal(t, []string{"c"}, m.KeptSessions())
			a := openSession(t, m, "a")
			assert.True(t, a.Evicted())
			assert.NoFileExists(t, filepath.Join(a.Dir(), "outputs", "f"))
			if disks {
				assert.Len(t, diskimage.MountsBelow(sessions), 2, "the open sessions'")
			}
			// Removing a kept session takes it off the list; a fresh Open of an id
			// never evicted is not Evicted.
			require.NoError(t, m.Remove("c"))
			assert.Empty(t, m.KeptSessions())
			require.NoError(t, a.Close())
			a2 := openSession(t, m, "a")
			assert.False(t, a2.Evicted(), "told once")
		})
	}
}

// TestKeptSessionsAfterRestart: a new Manager counts what an earlier run left
// as kept, oldest first by last write, and deletes those past the bound.
func TestKeptSessionsAfterRestart(t *testing.T) {
	root := filepath.Join(t.TempDir(), "kb")
	m1, err := New(Options{Root: root, DiskQuota: 16 << 20})
	require.NoError(t, err)
	disks := requireDisks(t, m1)
	old := time.Now().Add(-time.Hour)
	for i, id := range []string{"x", "y", "z"} {
		s, err := m1.Open(id)
		require.NoError(t, err)
		writeFile(t, filepath.Join(s.Dir(), "f"), id)
		require.NoError(t, s.Close())
		// y was written last, then z, then x.
		at := old.Add(time.Duration([]int{0, 2, 1}[i]) * time.Minute)
		require.NoError(t, os.Chtimes(filepath.Join(root, "sessions", id), at, at))
		if disks {
			require.NoError(t, os.Chtimes(filepath.Join(root, diskImagesDir, id+".img"), at, at))
		}
	}
	require.NoError(t, m1.Close())
	m2 := newManager(t, func(o *Options) { o.Root = root; o.DiskQuota = 16 << 20; o.MaxKeptSessions = 2 })
	assert.Equal(t, []string{"z", "y"}, m2.KeptSessions())
	assert.NoDirExists(t, filepath.Join(root, "sessions", "x"))
	x := openSession(t, m2, "x")
	assert.True(t, x.Evicted())
	y := openSession(t, m2, "y")
	assert.Equal(t, "y", readFile(t, filepath.Join(y.Dir(), "f")))
}

// TestKeptSessionsNone: MaxKeptSessions < 0 deletes a directory when its last
// Session closes; without a quota, directories are kept without bound, as
// before.
func TestKeptSessionsNone(t *testing.T) {
	m := newManager(t, func(o *Options) { o.DiskQuota = 16 << 20; o.MaxKeptSessions = -1 })
	s, err := m.Open("a")
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.NoDirExists(t, filepath.Join(m.Root(), "sessions", "a"))
	assert.Empty(t, m.KeptSessions())

	m = newManager(t, nil)
	for _, id := range []string{"a", "b", "c"} {
		s, err := m.Open(id)
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
	assert.Equal(t, []string{"a", "b", "c"}, dirNames(t, filepath.Join(m.Root(), "sessions")))
}

// TestKeptConcurrentOpenClose: Sessions on one directory opened and closed at
// once from many goroutines: while any is open the disk is mounted (every
// write lands on it), after the last close it is not, and nothing is lost.
func TestKeptConcurrentOpenClose(t *testing.T) {
	m := newManager(t, func(o *Options) { o.DiskQuota = 16 << 20 })
	disks := requireDisks(t, m)
	sessions := filepath.Join(m.Root(), "sessions")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				s, err := m.Open("s")
				if !assert.NoError(t, err) {
					return
				}
				if disks {
					fi, err := os.Stat(s.Dir())
					assert.NoError(t, err)
					assert.NotEqual(t, m.disks.sessionsDev, devOf(fi), "open, so mounted")
				}
				assert.NoError(t, os.WriteFile(filepath.Join(s.Dir(), "outputs", fmt.Sprintf("g%d-%d", g, i)), nil, 0o644))
				assert.NoError(t, s.Close())
			}
		}()
	}
	wg.Wait()
	assert.Empty(t, diskimage.MountsBelow(sessions))
	assert.Equal(t, []string{"s"}, m.KeptSessions())
	s := openSession(t, m, "s")
	assert.Len(t, dirNames(t, filepath.Join(s.Dir(), "outputs")), 160)
}

// A warm directory an earlier run left empty (a SIGKILL of serve) is removed by
// the next New; one that holds files (a resume's move that failed: ErrStranded
// names it) is kept for the operator (issue 46 item 11).
func TestNewRemovesEmptyWarmLeftovers(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	m, err := New(Options{Root: root})
	require.NoError(t, err)
	empty, err := m.Warm()
	require.NoError(t, err)
	full, err := m.Warm()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(full.Dir(), "outputs", "stranded.csv"), []byte("x"), 0o644))
	emptyDir, fullDir := empty.Dir(), full.Dir()
	require.NoError(t, m.Close()) // the Sessions stay open: as a killed process leaves them

	m, err = New(Options{Root: root})
	require.NoError(t, err)
	defer m.Close()
	_, err = os.Stat(emptyDir)
	require.ErrorIs(t, err, os.ErrNotExist, "the empty warm directory is removed")
	b, err := os.ReadFile(filepath.Join(fullDir, "outputs", "stranded.csv"))
	require.NoError(t, err, "a warm directory with files is kept")
	require.Equal(t, "x", string(b))
}
