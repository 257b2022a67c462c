package workspace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCollectRecreatesArtifactsDir removes the artifacts directory (or only the
// session's part of it) between two Collects, as an operator cleaning up under a
// running server might: the next Collect creates it again, with its modes, and
// collects both the new file and the earlier one whose copy went with it.
func TestCollectRecreatesArtifactsDir(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		remove func(m *Manager) string
	}{
		{"whole artifacts dir", func(m *Manager) string { return m.ArtifactsDir() }},
		{"session's artifacts", func(m *Manager) string { return filepath.Join(m.ArtifactsDir(), "s1") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, nil)
			s := openSession(t, m, "s1")
			out := filepath.Join(s.Dir(), "outputs")
			writeFile(t, filepath.Join(out, "first.txt"), "one")
			age(t, filepath.Join(out, "first.txt"))
			require.Equal(t, []string{"first.txt"}, collect(t, s))

			require.NoError(t, os.RemoveAll(tc.remove(m)))
			writeFile(t, filepath.Join(out, "sub", "second.txt"), "two")
			require.Equal(t, []string{"first.txt", "sub/second.txt"}, collect(t, s))
			assert.Equal(t, "one", readFile(t, filepath.Join(m.ArtifactsDir(), "s1", "first.txt")))
			assert.Equal(t, "two", readFile(t, filepath.Join(m.ArtifactsDir(), "s1", "sub", "second.txt")))
			for _, dir := range []string{m.ArtifactsDir(), filepath.Join(m.ArtifactsDir(), "s1")} {
				fi, err := os.Lstat(dir)
				require.NoError(t, err)
				assert.True(t, fi.IsDir())
				assert.Equal(t, DefaultDirMode, fi.Mode().Perm(), dir)
			}

			// And it stays working: a third call collects only what changed.
			writeFile(t, filepath.Join(out, "third.txt"), "three")
			require.Equal(t, []string{"third.txt"}, collect(t, s))
			arts, err := m.Artifacts("s1")
			require.NoError(t, err)
			assert.Equal(t, []string{"first.txt", "sub/second.txt", "third.txt"}, artifactNames(arts))

			_, err = s.SaveDisplay("d.png", []byte("png"), "")
			require.NoError(t, err)
		})
	}
}

// TestCollectRetriesFailedCopy: a file whose copy failed is copied by the next
// Collect even though nothing in outputs/ changed in between (the inotify
// shortcut must not skip it).
func TestCollectRetriesFailedCopy(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s1")
	out := filepath.Join(s.Dir(), "outputs")
	writeFile(t, filepath.Join(out, "a.txt"), "a")
	age(t, filepath.Join(out, "a.txt"))
	require.Equal(t, []string{"a.txt"}, collect(t, s))

	blocker := filepath.Join(m.ArtifactsDir(), "s1", "sub")
	writeFile(t, blocker, "not a directory")
	writeFile(t, filepath.Join(out, "sub", "b.txt"), "b")
	age(t, filepath.Join(out, "sub", "b.txt"))
	_, err := s.Collect()
	require.Error(t, err)

	require.NoError(t, os.Remove(blocker))
	require.Equal(t, []string{"sub/b.txt"}, collect(t, s))
}

// TestSaveDisplayRecreatesArtifactsDir: when a display is saved first after the
// artifacts were removed, the next Collect still copies outputs/ again.
func TestSaveDisplayRecreatesArtifactsDir(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s1")
	writeFile(t, filepath.Join(s.Dir(), "outputs", "first.txt"), "one")
	age(t, filepath.Join(s.Dir(), "outputs", "first.txt"))
	require.Equal(t, []string{"first.txt"}, collect(t, s))

	require.NoError(t, os.RemoveAll(m.ArtifactsDir()))
	_, err := s.SaveDisplay("d.png", []byte("png"), "")
	require.NoError(t, err)
	require.Equal(t, []string{"first.txt"}, collect(t, s))
	assert.Equal(t, "one", readFile(t, filepath.Join(m.ArtifactsDir(), "s1", "first.txt")))
}
