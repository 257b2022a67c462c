package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestArtifactsBudgetRefuses(t *testing.T) {
	const kib = 1 << 10
	m := newManager(t, func(o *Options) {
		o.MaxArtifactsTotalBytes = 250 * kib
		o.RemoveArtifacts = true
	})
	// Without a quota, each session's share is half the total.
	assert.EqualValues(t, 125*kib, m.ArtifactsShare())
	a := openSession(t, m, "a")
	for _, n := range []string{"1", "2", "3"} {
		writeFile(t, filepath.Join(a.Dir(), "outputs", n), strings.Repeat(n, 100*kib))
	}
	arts, err := a.Collect()
	require.ErrorIs(t, err, ErrArtifactsFull)
	require.ErrorIs(t, err, ErrSessionArtifactsFull)
	require.Len(t, arts, 1)
	first := arts[0].Name
	refused := map[string]bool{"1": true, "2": true, "3": true}
	delete(refused, first)
	require.Len(t, refused, 2)
	for n := range refused {
		assert.Contains(t, err.Error(), `collect "`+n+`"`)
		assert.NoFileExists(t, filepath.Join(m.ArtifactsDir(), "a", n))
	}
	assert.Contains(t, err.Error(), "over its 128000-byte share")
	used, limit := m.ArtifactsUsage()
	assert.EqualValues(t, 100*kib, used)
	assert.EqualValues(t, 250*kib, limit)

	// Refused again, and said again, while there is no room.
	arts, err = a.Collect()
	require.ErrorIs(t, err, ErrSessionArtifactsFull)
	assert.Empty(t, arts)

	// Rewriting an artifact counts only the difference.
	writeFile(t, filepath.Join(a.Dir(), "outputs", first), strings.Repeat("x", 100*kib))
	arts, err = a.Collect()
	require.ErrorIs(t, err, ErrSessionArtifactsFull)
	require.Len(t, arts, 1)
	used, _ = m.ArtifactsUsage()
	assert.EqualValues(t, 100*kib, used)

	// Another session has its own share, and only the total, shared by all
	// sessions with display data included, stops the third.
	b := openSession(t, m, "b")
	writeFile(t, filepath.Join(b.Dir(), "outputs", "big"), strings.Repeat("b", 100*kib))
	arts, err = b.Collect()
	require.NoError(t, err)
	require.Len(t, arts, 1)
	c := openSession(t, m, "c")
	_, err = c.SaveDisplay("p.png", make([]byte, 60*kib), "image/png")
	require.ErrorIs(t, err, ErrArtifactsFull)
	assert.NotErrorIs(t, err, ErrSessionArtifactsFull)
	assert.Contains(t, err.Error(), "over its 256000-byte total limit")
	_, err = c.SaveDisplay("small.png", make([]byte, 10*kib), "image/png")
	require.NoError(t, err)

	// Removing a session with RemoveArtifacts gives its share back.
	require.NoError(t, a.Close())
	require.NoError(t, m.Remove("a"))
	assert.NoDirExists(t, filepath.Join(m.ArtifactsDir(), "a"))
	used, _ = m.ArtifactsUsage()
	assert.EqualValues(t, 110*kib, used)
	_, err = c.SaveDisplay("p.png", make([]byte, 60*kib), "image/png")
	require.NoError(t, err)
}

func TestArtifactsBudgetCountsWhatIsThere(t *testing.T) {
	root := filepath.Join(t.TempDir(), "kb")
	art := filepath.Join(root, "artifacts", "old")
	require.NoError(t, os.MkdirAll(art, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(art, "f"), make([]byte, 5000), 0o644))
	m := newManager(t, func(o *Options) { o.Root = root; o.MaxArtifactsTotalBytes = 8000 })
	used, _ := m.ArtifactsUsage()
	assert.EqualValues(t, 5000, used)
	s := openSession(t, m, "s")
	writeFile(t, filepath.Join(s.Dir(), "outputs", "g"), strings.Repeat("g", 4000))
	_, err := s.Collect()
	require.ErrorIs(t, err, ErrArtifactsFull)
	// Removing a session keeps its artifacts by default.
	m2 := newManager(t, func(o *Options) { o.Root = filepath.Join(t.TempDir(), "kb2") })
	s2 := openSession(t, m2, "k")
	writeFile(t, filepath.Join(s2.Dir(), "outputs", "g"), "g")
	_, err = s2.Collect()
	require.NoError(t, err)
	require.NoError(t, s2.Close())
	require.NoError(t, m2.Remove("k"))
	assert.FileExists(t, filepath.Join(m2.ArtifactsDir(), "k", "g"))
}
