package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := New(Options{})
	assert.EqualError(t, err, "workspace: Options.Root is required")

	root := filepath.Join(t.TempDir(), "kb")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sessions"), 0o777))
	require.NoError(t, os.Chmod(filepath.Join(root, "sessions"), 0o777))
	m, err := New(Options{Root: root})
	require.NoError(t, err)
	defer m.Close()
	fi, err := os.Stat(filepath.Join(root, "sessions"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "sessions/ made private even if it existed")
	fi, err = os.Stat(filepath.Join(root, "artifacts"))
	require.NoError(t, err)
	assert.Equal(t, DefaultDirMode, fi.Mode().Perm())
	assert.Equal(t, filepath.Join(root, "artifacts"), m.ArtifactsDir())
	assert.Equal(t, root, m.Root())

	elsewhere := filepath.Join(t.TempDir(), "shared")
	m2, err := New(Options{Root: root, ArtifactsDir: elsewhere})
	require.NoError(t, err)
	defer m2.Close()
	assert.Equal(t, elsewhere, m2.ArtifactsDir())
	assert.DirExists(t, elsewhere)
}

func TestOpen(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "Sess_1-a")
	assert.Equal(t, "Sess_1-a", s.ID())
	assert.Equal(t, filepath.Join(m.Root(), "sessions", "Sess_1-a"), s.Dir())
	for _, sub := range []string{"inputs", "outputs"} {
		fi, err := os.Lstat(filepath.Join(s.Dir(), sub))
		require.NoError(t, err)
		assert.True(t, fi.IsDir())
		assert.Equal(t, DefaultDirMode, fi.Mode().Perm())
	}

	// Reopening repairs a session whose outputs/ the kernel replaced by a link.
	outside := t.TempDir()
	require.NoError(t, os.Remove(filepath.Join(s.Dir(), "outputs")))
	require.NoError(t, os.Symlink(outside, filepath.Join(s.Dir(), "outputs")))
	writeFile(t, filepath.Join(s.Dir(), "inputs", "kept"), "kept")
	s2 := openSession(t, m, "Sess_1-a")
	fi, err := os.Lstat(filepath.Join(s2.Dir(), "outputs"))
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	assert.Equal(t, "kept", readFile(t, filepath.Join(s2.Dir(), "inputs", "kept")))

	opts := Options{DirMode: 0o750}
	m3 := newManager(t, func(o *Options) { *o = Options{Root: o.Root, DirMode: opts.DirMode} })
	fi, err = os.Stat(openSession(t, m3, "x").Dir())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o750), fi.Mode().Perm())
}

func TestOpenRejectsInvalidIDs(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	for _, id := range []string{"", ".", "..", "../x", "a/b", ".warm-0123456789abcdef", "a b", "ä", "a\x00", strings.Repeat("a", 65)} {
		_, err := m.Open(id)
		assert.ErrorIs(t, err, ErrInvalidSession, "id %q", id)
	}
	_, err := m.Open("a/b")
	assert.EqualError(t, err, `open session: session "a/b": not 1-64 characters of A-Z, a-z, 0-9, '_' and '-': invalid session id`)
	assert.Equal(t, []string{}, dirNames(t, filepath.Join(m.Root(), "sessions")))
	_, err = m.Open(strings.Repeat("a", 64))
	assert.NoError(t, err)
}

func TestWarmAdopt(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	warm, err := m.Warm()
	require.NoError(t, err)
	assert.True(t, isWarmID(warm.ID()), warm.ID())
	assert.DirExists(t, filepath.Join(warm.Dir(), "inputs"))

	// A running kernel holds its cwd and open files; both survive the rename.
	cwd, err := os.Open(warm.Dir())
	require.NoError(t, err)
	defer cwd.Close()
	held, err := os.Create(filepath.Join(warm.Dir(), "outputs", "held.txt"))
	require.NoError(t, err)
	defer held.Close()

	s, err := m.Adopt(warm, "agent-1")
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, "agent-1", s.ID())
	assert.Equal(t, filepath.Join(m.Root(), "sessions", "agent-1"), s.Dir())
	assert.NoDirExists(t, warm.Dir())

	_, err = held.WriteString("written after adopt")
	require.NoError(t, err)
	assert.Equal(t, "written after adopt", readFile(t, filepath.Join(s.Dir(), "outputs", "held.txt")))
	names, err := cwd.Readdirnames(-1)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"inputs", "outputs"}, names, "the old handle is the adopted directory")

	arts, err := s.Collect()
	require.NoError(t, err)
	require.Len(t, arts, 1)
	assert.Equal(t, filepath.Join(m.ArtifactsDir(), "agent-1", "held.txt"), arts[0].Path)

	_, err = warm.Collect()
	assert.ErrorIs(t, err, ErrClosed, "the warm Session is closed by Adopt")
	_, err = m.Adopt(warm, "agent-2")
	assert.ErrorIs(t, err, ErrNotWarm, "adopted twice")
}

func TestAdoptRejects(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	openSession(t, m, "taken")
	warm, err := m.Warm()
	require.NoError(t, err)
	defer warm.Close()

	_, err = m.Adopt(warm, "taken")
	assert.ErrorIs(t, err, ErrExists)
	assert.EqualError(t, err, `adopt warm session `+warm.ID()+` as "taken": session directory already exists`)
	assert.DirExists(t, warm.Dir(), "the warm dir stays for another try")

	_, err = m.Adopt(warm, "../x")
	assert.ErrorIs(t, err, ErrInvalidSession)

	plain := openSession(t, m, "plain")
	_, err = m.Adopt(plain, "new")
	assert.ErrorIs(t, err, ErrNotWarm)

	other := newManager(t, nil)
	_, err = other.Adopt(warm, "new")
	assert.ErrorIs(t, err, ErrNotWarm)
	_, err = m.Adopt(nil, "new")
	assert.ErrorIs(t, err, ErrNotWarm)
}

func TestRemove(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	writeFile(t, filepath.Join(s.Dir(), "outputs", "a.txt"), "a")
	_, err := s.Collect()
	require.NoError(t, err)
	hostData := t.TempDir()
	writeFile(t, filepath.Join(hostData, "sub", "x.csv"), "x")
	require.NoError(t, s.AddData("ds", hostData, 0))

	require.NoError(t, m.Remove("s"))
	assert.NoDirExists(t, s.Dir())
	assert.FileExists(t, filepath.Join(m.ArtifactsDir(), "s", "a.txt"), "artifacts stay")
	assert.NoError(t, m.Remove("s"), "removing a missing session is fine")

	warm, err := m.Warm()
	require.NoError(t, err)
	defer warm.Close()
	require.NoError(t, m.Remove(warm.ID()))
	assert.NoDirExists(t, warm.Dir())

	assert.ErrorIs(t, m.Remove(".."), ErrInvalidSession)
	assert.ErrorIs(t, m.Remove(".warm-../../x"), ErrInvalidSession)
}

func TestManagerConcurrentOpen(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			s, err := m.Open([]string{"a", "b"}[i%2])
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range 16 {
		assert.NoError(t, <-errs)
	}
}

func TestRemoveDoesNotFollowLinks(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "keep.txt"), "keep")
	require.NoError(t, os.Symlink(outside, filepath.Join(s.Dir(), "outputs", "dirlink")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "keep.txt"), filepath.Join(s.Dir(), "filelink")))

	require.NoError(t, m.Remove("s"))
	assert.NoDirExists(t, s.Dir())
	assert.Equal(t, "keep", readFile(t, filepath.Join(outside, "keep.txt")))
}

func TestOpenRefusesLinkedSessionDir(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(m.Root(), "sessions", "evil")))
	_, err := m.Open("evil")
	assert.EqualError(t, err, `open session "evil": open evil: is a symbolic link, not a directory`)
	assert.Empty(t, dirNames(t, outside), "nothing created through the link")
}
