package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRemoveDoesNotBlockOthers removes a session holding 50,000 files while
// another session is opened, listed and reopened over and over: none of those may
// wait for the delete, which takes a second or more.
func TestRemoveDoesNotBlockOthers(t *testing.T) {
	m := newManager(t, nil)
	big := openSession(t, m, "big")
	// Hard links to one empty file: creating 50,000 inodes can take a minute on
	// a busy machine, linking takes a second, and deleting costs about the same.
	src := filepath.Join(big.Dir(), "outputs", "src")
	writeFile(t, src, "")
	for d := range 50 {
		dir := filepath.Join(big.Dir(), "outputs", fmt.Sprintf("d%02d", d))
		require.NoError(t, os.Mkdir(dir, 0o755))
		for f := range 1000 {
			if err := syscall.Link(src, filepath.Join(dir, "f"+strconv.Itoa(f))); err != nil {
				t.Fatal(err)
			}
		}
	}
	require.NoError(t, big.Close())
	openSession(t, m, "other")

	started, done := make(chan struct{}), make(chan struct{})
	var took time.Duration
	go func() {
		defer close(done)
		close(started)
		t0 := time.Now()
		assert.NoError(t, m.Remove("big"))
		took = time.Since(t0)
	}()
	<-started
	var worst time.Duration
	ops := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		t0 := time.Now()
		s, err := m.Open("other")
		require.NoError(t, err)
		require.NoError(t, s.Close())
		_, err = m.Artifacts("other")
		require.NoError(t, err)
		worst = max(worst, time.Since(t0))
		ops++
	}
	t.Logf("delete of 50,000 files took %v; %d operations of another session meanwhile, the slowest %v", took, ops, worst)
	require.NoDirExists(t, filepath.Join(m.Root(), "sessions", "big"))
	assert.Less(t, worst, 200*time.Millisecond, "another session waited for the delete")
	entries, err := os.ReadDir(filepath.Join(m.Root(), "sessions"))
	require.NoError(t, err)
	assert.Equal(t, []string{"other"}, namesOf(entries), "nothing left behind")
}

func namesOf(entries []os.DirEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Name()
	}
	return out
}

// TestNewEmptiesTrash: what a Remove cut short left behind (read-only data copies
// included) is deleted by the next New; sessions stay.
func TestNewEmptiesTrash(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "kb")
	m, err := New(Options{Root: root})
	require.NoError(t, err)
	s, err := m.Open("keep")
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, m.Close())
	trash := filepath.Join(root, "sessions", trashPrefix+"0123456789abcdef")
	writeFile(t, filepath.Join(trash, "data", "ds", "x"), "x")
	require.NoError(t, os.Chmod(filepath.Join(trash, "data", "ds"), 0o555))

	m = newManager(t, func(o *Options) { o.Root = root })
	require.NoDirExists(t, trash)
	assert.Equal(t, []string{"keep"}, dirNames(t, filepath.Join(m.Root(), "sessions")))
}
