package workspace

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// hibernatedDir makes session id's directory as a hibernated session leaves it:
// files in outputs/ and inputs/, a subdirectory, a hidden file, a symbolic link
// pointing out of the session, a snapshot, a data copy and a file the code put in
// data/; no Session is open on it.
func hibernatedDir(t *testing.T, m *Manager, id, dataDir string) string {
	t.Helper()
	s, err := m.Open(id)
	require.NoError(t, err)
	require.NoError(t, s.AddData("ds", dataDir, 0))
	d := s.Dir()
	writeFile(t, filepath.Join(d, "outputs", "old.txt"), "old output")
	writeFile(t, filepath.Join(d, "inputs", "in.txt"), "input")
	writeFile(t, filepath.Join(d, "sub", "deeper", "f.txt"), "deep")
	writeFile(t, filepath.Join(d, ".hidden"), "hidden")
	writeFile(t, filepath.Join(d, ".kernelbox-snapshot"), "snapshot bytes")
	writeFile(t, filepath.Join(d, "data", "mine.txt"), "the code's own")
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(d, "link")))
	require.NoError(t, s.Close())
	return d
}

// hostDataDir is a template data directory holding one file with content.
func hostDataDir(t *testing.T, content string) string {
	t.Helper()
	d := t.TempDir()
	writeFile(t, filepath.Join(d, "table.csv"), content)
	return d
}

func TestAdoptFiles(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	dir := hibernatedDir(t, m, "sleeper", hostDataDir(t, "old copy"))
	warm, err := m.Warm()
	require.NoError(t, err)
	require.NoError(t, warm.AddData("ds", hostDataDir(t, "warm copy"), 0))
	// The warm kernel holds its working directory: it must find the files there.
	cwd, err := os.Open(warm.Dir())
	require.NoError(t, err)
	defer cwd.Close()

	s, err := m.AdoptFiles(warm, "sleeper")
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, dir, s.Dir())
	assert.NoDirExists(t, warm.Dir())
	assert.Equal(t, []string{".hidden", ".kernelbox-snapshot", "data", "inputs", "link", "outputs", "sub"}, dirNames(t, dir))
	assert.Equal(t, "old output", readFile(t, filepath.Join(dir, "outputs", "old.txt")))
	assert.Equal(t, "deep", readFile(t, filepath.Join(dir, "sub", "deeper", "f.txt")))
	assert.Equal(t, "hidden", readFile(t, filepath.Join(dir, ".hidden")))
	target, err := os.Readlink(filepath.Join(dir, "link"))
	require.NoError(t, err, "the link is moved as itself")
	assert.Equal(t, "/etc/passwd", target)
	assert.Equal(t, "warm copy", readFile(t, filepath.Join(dir, "data", "ds", "table.csv")), "the warm copy of the template's data is kept")
	assert.Equal(t, "the code's own", readFile(t, filepath.Join(dir, "data", "mine.txt")))
	assert.Equal(t, []string{"artifacts", "sessions"}, dirNames(t, m.Root()))
	assert.Equal(t, []string{"sleeper"}, dirNames(t, filepath.Join(m.Root(), "sessions")), "no warm, no trash left")

	// The warm kernel's handle is the session directory now.
	var st unix.Stat_t
	require.NoError(t, unix.Fstatat(int(cwd.Fd()), "sub/deeper/f.txt", &st, unix.AT_SYMLINK_NOFOLLOW))
	// The earlier incarnation's outputs are not this one's artifacts; new ones are.
	reused, n := s.Reused()
	assert.True(t, reused)
	assert.Equal(t, 1, n)
	writeFile(t, filepath.Join(dir, "outputs", "new.txt"), "new")
	arts, err := s.Collect()
	require.NoError(t, err)
	assert.Equal(t, []string{"new.txt"}, artifactNames(arts))
	assert.Equal(t, int64(len("input")), s.stagedBytes(), "inputs/ is counted")

	_, err = warm.Collect()
	assert.ErrorIs(t, err, ErrClosed, "the warm Session is closed")
	_, err = m.AdoptFiles(warm, "sleeper")
	assert.ErrorIs(t, err, ErrNotWarm)
}

// A conflicting entry fails the adoption with everything back where it was, and
// the warm session stays warm: it can still be adopted.
func TestAdoptFilesConflict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		clash func(t *testing.T, warmDir string)
	}{
		{"file", func(t *testing.T, w string) { writeFile(t, filepath.Join(w, "sub"), "warm's") }},
		{"nonempty dir", func(t *testing.T, w string) { writeFile(t, filepath.Join(w, "outputs", "x"), "warm's") }},
		{"link", func(t *testing.T, w string) { require.NoError(t, os.Symlink("inputs", filepath.Join(w, ".hidden"))) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, nil)
			dir := hibernatedDir(t, m, "sleeper", hostDataDir(t, "old copy"))
			warm, err := m.Warm()
			require.NoError(t, err)
			tc.clash(t, warm.Dir())
			before, warmBefore := treeOf(t, dir), treeOf(t, warm.Dir())

			_, err = m.AdoptFiles(warm, "sleeper")
			require.ErrorIs(t, err, ErrConflict)
			require.NotErrorIs(t, err, ErrStranded)
			assert.Equal(t, before, treeOf(t, dir), "the session's files are back")
			assert.Equal(t, warmBefore, treeOf(t, warm.Dir()), "the warm directory is as it was")
			assert.ElementsMatch(t, []string{"sleeper", warm.ID()}, dirNames(t, filepath.Join(m.Root(), "sessions")))

			s, err := m.Adopt(warm, "fresh")
			require.NoError(t, err, "the warm session is still warm")
			require.NoError(t, s.Close())
		})
	}
}

// treeOf maps every path under dir to what it is: a file's content, a link's
// target, a directory's mode.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		require.NoError(t, err)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			require.NoError(t, err)
			out[rel] = "-> " + target
		case d.IsDir():
			out[rel] = fi.Mode().String()
		default:
			out[rel] = fi.Mode().String() + " " + readFile(t, p)
		}
		return nil
	}))
	return out
}

func TestAdoptFilesRefuses(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	warm, err := m.Warm()
	require.NoError(t, err)
	_, err = m.AdoptFiles(warm, "missing")
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = m.AdoptFiles(warm, "../x")
	require.ErrorIs(t, err, ErrInvalidSession)
	other := newManager(t, nil)
	_, err = other.AdoptFiles(warm, "missing")
	require.ErrorIs(t, err, ErrNotWarm, "a warm session of another manager")

	// sessions/<id> that is a link to another session's directory is not followed.
	require.NoError(t, os.Symlink(warm.ID(), filepath.Join(m.Root(), "sessions", "linked")))
	_, err = m.AdoptFiles(warm, "linked")
	require.Error(t, err)
	assert.DirExists(t, warm.Dir())
	require.NoError(t, os.Remove(filepath.Join(m.Root(), "sessions", "linked")))
}

func TestAdoptFilesClosedManager(t *testing.T) {
	t.Parallel()
	m, err := New(Options{Root: filepath.Join(t.TempDir(), "kb")})
	require.NoError(t, err)
	hibernatedDir(t, m, "sleeper", hostDataDir(t, "old copy"))
	warm, err := m.Warm()
	require.NoError(t, err)
	require.NoError(t, m.Close())
	_, err = m.AdoptFiles(warm, "sleeper")
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, warm.Close())
}

// With session disks, moving the files would copy them between two disks: refused.
func TestDiskQuotaAdoptFilesRefused(t *testing.T) {
	m := newManager(t, func(o *Options) { o.DiskQuota = 32 << 20 })
	if !requireDisks(t, m) {
		return
	}
	s := openSession(t, m, "sleeper")
	writeFile(t, filepath.Join(s.Dir(), "kept.txt"), "kept")
	require.NoError(t, s.Close())
	warm, err := m.Warm()
	require.NoError(t, err)
	t.Cleanup(func() { warm.Close() })
	_, err = m.AdoptFiles(warm, "sleeper")
	require.ErrorIs(t, err, ErrOwnDisk)
	s2 := openSession(t, m, "sleeper")
	assert.Equal(t, "kept", readFile(t, filepath.Join(s2.Dir(), "kept.txt")))
}
