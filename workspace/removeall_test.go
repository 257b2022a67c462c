package workspace

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// deepChain makes depth nested directories named "d" below dir (created if
// missing), as a kernel does by chdir-ing down: past PATH_MAX, so it holds one
// descriptor at a time. A file "f" sits at every level divisible by fileEvery
// (none when 0).
func deepChain(tb testing.TB, dir string, depth, fileEvery int) {
	tb.Helper()
	require.NoError(tb, os.MkdirAll(dir, 0o755))
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(tb, err)
	for i := 1; i <= depth; i++ {
		require.NoError(tb, unix.Mkdirat(fd, "d", 0o755))
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		require.NoError(tb, err)
		fd = next
		if fileEvery > 0 && i%fileEvery == 0 {
			f, err := unix.Openat(fd, "f", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
			require.NoError(tb, err)
			unix.Close(f)
		}
	}
	unix.Close(fd)
}

// lowFileLimit sets this process's soft RLIMIT_NOFILE to what it has open now
// plus room, for the rest of the test.
func lowFileLimit(tb testing.TB, room uint64) {
	tb.Helper()
	var old unix.Rlimit
	require.NoError(tb, unix.Getrlimit(unix.RLIMIT_NOFILE, &old))
	open, err := os.ReadDir("/proc/self/fd")
	require.NoError(tb, err)
	lim := old
	lim.Cur = uint64(len(open)) + room
	require.NoError(tb, unix.Setrlimit(unix.RLIMIT_NOFILE, &lim))
	tb.Cleanup(func() { _ = unix.Setrlimit(unix.RLIMIT_NOFILE, &old) })
	tb.Logf("RLIMIT_NOFILE %d (had %d open)", lim.Cur, len(open))
}

// TestSessionRemoveDeepChain: a recursive delete of a 21,000-level chain the
// kernel made succeeds under a file limit that leaves room for a few dozen
// descriptors (issue 33, 7g: a descriptor per level failed with "too many open
// files" every time), and leaves the rest of the session alone.
func TestSessionRemoveDeepChain(t *testing.T) {
	m := newManager(t, nil)
	s := openSession(t, m, "s1")
	deepChain(t, filepath.Join(s.Dir(), "outputs", "deep"), 21000, 1000)
	writeFile(t, filepath.Join(s.Dir(), "outputs", "keep"), "k")
	lowFileLimit(t, 40)
	start := time.Now()
	require.NoError(t, s.Remove("outputs/deep", true))
	t.Logf("deleted in %v", time.Since(start).Round(time.Millisecond))
	assert.Equal(t, []string{"keep"}, dirNames(t, filepath.Join(s.Dir(), "outputs")))
	// Removing the session itself (the Manager's delete) holds few descriptors too.
	deepChain(t, filepath.Join(s.Dir(), "outputs", "again"), 21000, 0)
	require.NoError(t, s.Close())
	require.NoError(t, m.Remove("s1"))
	assert.Empty(t, dirNames(t, filepath.Join(m.Root(), "sessions")))
}

// TestRemoveAllAtLeavesLinkedTargets: a deep tree with links to a directory
// outside the session (below and beyond the depth where subtrees are moved up)
// is deleted without touching the link targets.
func TestRemoveAllAtLeavesLinkedTargets(t *testing.T) {
	m := newManager(t, nil)
	s := openSession(t, m, "s1")
	outside := filepath.Join(t.TempDir(), "host")
	writeFile(t, filepath.Join(outside, "precious"), "p")
	deepChain(t, filepath.Join(s.Dir(), "tree"), 100, 0)
	p := filepath.Join(s.Dir(), "tree")
	for i := 1; i <= 100; i++ {
		p = filepath.Join(p, "d")
		if i == 3 || i == 40 || i == 99 {
			require.NoError(t, os.Symlink(outside, filepath.Join(p, "link")))
			require.NoError(t, os.Symlink(filepath.Join(outside, "precious"), filepath.Join(p, "flink")))
		}
	}
	require.NoError(t, s.Remove("tree", true))
	assert.NoDirExists(t, filepath.Join(s.Dir(), "tree"))
	assert.Equal(t, "p", readFile(t, filepath.Join(outside, "precious")))
}

// TestRemoveAllAtWhileKernelRenames: while the delete runs, "the kernel" keeps
// swapping directories of the tree for links to a host directory and moving
// subtrees out of it into the session; nothing outside the session is deleted,
// and whatever the delete could not reach stays inside the session.
func TestRemoveAllAtWhileKernelRenames(t *testing.T) {
	m := newManager(t, nil)
	s := openSession(t, m, "s1")
	outside := filepath.Join(t.TempDir(), "host")
	writeFile(t, filepath.Join(outside, "precious"), "p")
	writeFile(t, filepath.Join(outside, "d", "precious"), "p")
	tree := filepath.Join(s.Dir(), "tree")
	for i := range 20 {
		deepChain(t, filepath.Join(tree, "w"+string(rune('a'+i))), 60, 7)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; !stop.Load(); n++ {
			// Walk down some way and swap a directory for a link to the host.
			p := filepath.Join(tree, "w"+string(rune('a'+n%20)))
			for range n % 30 {
				p = filepath.Join(p, "d")
			}
			aside := filepath.Join(s.Dir(), "aside"+string(rune('a'+n%26)))
			if os.Rename(p, aside) == nil {
				_ = os.Symlink(outside, p)
			}
		}
	}()
	err := s.Remove("tree", true)
	stop.Store(true)
	wg.Wait()
	t.Logf("remove: %v", err)
	assert.Equal(t, "p", readFile(t, filepath.Join(outside, "precious")))
	assert.Equal(t, "p", readFile(t, filepath.Join(outside, "d", "precious")))
	if err == nil {
		assert.NoDirExists(t, tree)
	}
}
