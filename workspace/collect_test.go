package workspace

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// collect runs s.Collect, requires no error and returns the artifact names.
func collect(t *testing.T, s *Session) []string {
	t.Helper()
	arts, err := s.Collect()
	require.NoError(t, err)
	return artifactNames(arts)
}

// age sets path's mtime an hour back, so Collect does not treat it as racy.
func age(t *testing.T, path string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(path, old, old))
}

func TestCollect(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s1")
	out := filepath.Join(s.Dir(), "outputs")
	writeFile(t, filepath.Join(out, "plot.png"), "\x89PNG\r\n\x1a\nfake")
	writeFile(t, filepath.Join(out, "nested", "deeper", "table.json"), `{"a":1}`)
	writeFile(t, filepath.Join(out, "notes"), "plain words")

	arts, err := s.Collect()
	require.NoError(t, err)
	require.Len(t, arts, 3)
	assert.Equal(t, Artifact{
		Path:   filepath.Join(m.ArtifactsDir(), "s1", "nested", "deeper", "table.json"),
		Name:   "nested/deeper/table.json",
		Size:   7,
		SHA256: sha(`{"a":1}`),
		MIME:   "application/json",
	}, arts[0])
	assert.Equal(t, "notes", arts[1].Name)
	assert.Equal(t, "text/plain; charset=utf-8", arts[1].MIME, "sniffed when the extension says nothing")
	assert.Equal(t, "plot.png", arts[2].Name)
	assert.Equal(t, "image/png", arts[2].MIME)
	for _, a := range arts {
		assert.Equal(t, readFile(t, filepath.Join(out, filepath.FromSlash(a.Name))), readFile(t, a.Path))
	}

	b, err := json.Marshal(arts[0])
	require.NoError(t, err)
	assert.JSONEq(t, `{"path":"`+arts[0].Path+`","name":"nested/deeper/table.json","size":7,"sha256":"`+sha(`{"a":1}`)+`","mime":"application/json"}`, string(b))
}

func TestCollectReportsChangesOnce(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	out := filepath.Join(s.Dir(), "outputs")
	p := filepath.Join(out, "result.txt")
	art := filepath.Join(m.ArtifactsDir(), "s", "result.txt")

	steps := []struct {
		name   string
		change func(t *testing.T)
		want   []string
		art    string
	}{
		{"new file reported", func(t *testing.T) { writeFile(t, p, "v1") }, []string{"result.txt"}, "v1"},
		{"untouched file not reported", func(t *testing.T) {}, []string{}, "v1"},
		{"same-size rewrite right after a collect reported", func(t *testing.T) { writeFile(t, p, "v2") }, []string{"result.txt"}, "v2"},
		{"rewrite with identical content not reported", func(t *testing.T) { writeFile(t, p, "v2") }, []string{}, "v2"},
		{"replaced by a new inode with identical content not reported", func(t *testing.T) {
			require.NoError(t, os.Remove(p))
			writeFile(t, p, "v2")
		}, []string{}, "v2"},
		{"modified file reported again", func(t *testing.T) { writeFile(t, p, "version three") }, []string{"result.txt"}, "version three"},
		{"another file beside it", func(t *testing.T) { writeFile(t, filepath.Join(out, "b.txt"), "b") }, []string{"b.txt"}, "version three"},
		{"deleted file keeps its artifact", func(t *testing.T) { require.NoError(t, os.Remove(p)) }, []string{}, "version three"},
		{"recreated file reported as new", func(t *testing.T) { writeFile(t, p, "version three") }, []string{"result.txt"}, "version three"},
	}
	for _, step := range steps {
		step.change(t)
		assert.Equal(t, step.want, collect(t, s), step.name)
		assert.Equal(t, step.art, readFile(t, art), step.name)
	}
}

// TestCollectTrustsStat shows that a file whose size, mtime and inode are unchanged
// is not even read: Collect stays cheap when nothing changed.
func TestCollectTrustsStat(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	p := filepath.Join(s.Dir(), "outputs", "f.txt")
	writeFile(t, p, "aaaa")
	age(t, p)
	assert.Equal(t, []string{"f.txt"}, collect(t, s))

	fi, err := os.Stat(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, []byte("bbbb"), 0o644))
	require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
	assert.Equal(t, []string{}, collect(t, s), "same size, mtime and inode: not opened")
}

func TestCollectSkipsLinksAndSpecialFiles(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	out := filepath.Join(s.Dir(), "outputs")
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(out, "passwd")))
	require.NoError(t, os.Symlink("../inputs", filepath.Join(out, "inputs-link")))
	writeFile(t, filepath.Join(s.Dir(), "inputs", "secret.txt"), "secret")
	writeFile(t, filepath.Join(out, "real.txt"), "real")
	require.NoError(t, os.Symlink("real.txt", filepath.Join(out, "alias.txt")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(out, "pipe"), 0o644))

	done := make(chan []string)
	go func() {
		arts, err := s.Collect()
		assert.NoError(t, err)
		done <- artifactNames(arts)
	}()
	select {
	case names := <-done:
		assert.Equal(t, []string{"real.txt"}, names)
	case <-time.After(10 * time.Second):
		t.Fatal("Collect blocked on the FIFO")
	}
	assert.Equal(t, []string{"real.txt"}, dirNames(t, filepath.Join(m.ArtifactsDir(), "s")))
}

func TestCollectKeepsSessionsApart(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	a := openSession(t, m, "a")
	b := openSession(t, m, "b")
	writeFile(t, filepath.Join(a.Dir(), "outputs", "plot.png"), "from a")
	writeFile(t, filepath.Join(b.Dir(), "outputs", "plot.png"), "from b")
	aa, err := a.Collect()
	require.NoError(t, err)
	ba, err := b.Collect()
	require.NoError(t, err)
	require.Len(t, aa, 1)
	require.Len(t, ba, 1)
	assert.NotEqual(t, aa[0].Path, ba[0].Path)
	assert.Equal(t, "from a", readFile(t, aa[0].Path))
	assert.Equal(t, "from b", readFile(t, ba[0].Path))
}

func TestCollectLimits(t *testing.T) {
	t.Parallel()
	t.Run("file over MaxArtifactBytes skipped and reported once", func(t *testing.T) {
		t.Parallel()
		m := newManager(t, func(o *Options) { o.MaxArtifactBytes = 5 })
		s := openSession(t, m, "s")
		out := filepath.Join(s.Dir(), "outputs")
		writeFile(t, filepath.Join(out, "big.bin"), "0123456789")
		writeFile(t, filepath.Join(out, "ok.txt"), "ok")
		arts, err := s.Collect()
		assert.Equal(t, []string{"ok.txt"}, artifactNames(arts), "the rest still collected")
		assert.ErrorIs(t, err, ErrTooLarge)
		assert.EqualError(t, err, `collect "big.bin": 10 bytes, over the 5-byte artifact limit: too large`)
		arts, err = s.Collect()
		assert.NoError(t, err, "reported once")
		assert.Empty(t, arts)
		writeFile(t, filepath.Join(out, "big.bin"), "0123")
		assert.Equal(t, []string{"big.bin"}, collect(t, s), "collected once it fits")
	})
	t.Run("too many files", func(t *testing.T) {
		t.Parallel()
		m := newManager(t, func(o *Options) { o.MaxArtifactFiles = 3 })
		s := openSession(t, m, "s")
		for _, n := range []string{"a", "b", "c", "d", "e"} {
			writeFile(t, filepath.Join(s.Dir(), "outputs", n), n)
		}
		arts, err := s.Collect()
		assert.Len(t, arts, 3)
		assert.ErrorIs(t, err, ErrTooManyFiles)
		assert.EqualError(t, err, "collect: outputs/ holds more than 3 entries; the rest were not collected: too many files")
	})
	t.Run("too deep", func(t *testing.T) {
		t.Parallel()
		m := newManager(t, nil)
		s := openSession(t, m, "s")
		deep := filepath.Join(s.Dir(), "outputs", strings.Repeat("d/", maxDepth+1))
		writeFile(t, filepath.Join(deep, "lost.txt"), "x")
		writeFile(t, filepath.Join(s.Dir(), "outputs", strings.Repeat("d/", maxDepth), "found.txt"), "y")
		arts, err := s.Collect()
		require.Len(t, arts, 1)
		assert.Equal(t, strings.Repeat("d/", maxDepth)+"found.txt", arts[0].Name)
		assert.ErrorIs(t, err, ErrTooDeep)
	})
}

func TestCollectTamperedOutputs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		tamper  func(t *testing.T, outputs string)
		wantErr string
	}{
		{"symlink to /etc", func(t *testing.T, outputs string) {
			require.NoError(t, os.RemoveAll(outputs))
			require.NoError(t, os.Symlink("/etc", outputs))
		}, "collect: outputs/: open outputs: is a symbolic link, not a directory"},
		{"missing", func(t *testing.T, outputs string) {
			require.NoError(t, os.RemoveAll(outputs))
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, nil)
			s := openSession(t, m, "s")
			tt.tamper(t, filepath.Join(s.Dir(), "outputs"))
			arts, err := s.Collect()
			assert.Empty(t, arts)
			if tt.wantErr == "" {
				assert.NoError(t, err)
			} else {
				assert.EqualError(t, err, tt.wantErr)
			}
			_, err = os.Stat(filepath.Join(m.ArtifactsDir(), "s"))
			assert.True(t, os.IsNotExist(err), "nothing copied")
		})
	}
}

func TestSaveDisplay(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	a, err := s.SaveDisplay("cell1-0.svg", []byte("<svg/>"), "image/svg+xml")
	require.NoError(t, err)
	assert.Equal(t, Artifact{
		Path:   filepath.Join(m.ArtifactsDir(), "s", "display", "cell1-0.svg"),
		Name:   "display/cell1-0.svg",
		Size:   6,
		SHA256: sha("<svg/>"),
		MIME:   "image/svg+xml",
	}, a)
	assert.Equal(t, "<svg/>", readFile(t, a.Path))

	a, err = s.SaveDisplay("cell1-1", []byte("\x89PNG\r\n\x1a\n...."), "")
	require.NoError(t, err)
	assert.Equal(t, "image/png", a.MIME)

	_, err = s.SaveDisplay("../escape.png", []byte("x"), "image/png")
	assert.ErrorIs(t, err, ErrInvalidName)

	small := newManager(t, func(o *Options) { o.MaxArtifactBytes = 2 })
	_, err = openSession(t, small, "s").SaveDisplay("big.png", []byte("xyz"), "image/png")
	assert.ErrorIs(t, err, ErrTooLarge)
}

// TestCollectRacyFile rewrites a file just after a Collect with the same size and
// mtime (as a coarse file system clock would): unlike in TestCollectTrustsStat,
// the file was modified close to the Collect, so the next one hashes it.
func TestCollectRacyFile(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	p := filepath.Join(s.Dir(), "outputs", "f.txt")
	writeFile(t, p, "aaaa")
	assert.Equal(t, []string{"f.txt"}, collect(t, s))

	fi, err := os.Stat(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, []byte("bbbb"), 0o644))
	require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
	assert.Equal(t, []string{"f.txt"}, collect(t, s), "racy file hashed again")
	assert.Equal(t, "bbbb", readFile(t, filepath.Join(m.ArtifactsDir(), "s", "f.txt")))
	assert.Equal(t, []string{}, collect(t, s), "and not reported twice")
}

// TestMarkTransitions: settle's step from what a copy concluded (done or racy)
// and whether the file was still being written to the mark the next Collect
// reads.
func TestMarkTransitions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		from  mark
		still bool
		want  mark
	}{
		{done, false, done},
		{racy, false, racy},
		{done, true, partial},
		{racy, true, partialRacy},
	} {
		got := tc.from.withPartial(tc.still)
		assert.Equal(t, tc.want, got, "%d still=%v", tc.from, tc.still)
		assert.Equal(t, tc.still, got.isPartial())
	}
	assert.False(t, skipped.isPartial())
}
