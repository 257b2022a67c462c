package workspace

import (
	"github.com/kernelbox/kernelbox/api"

	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tempLeft lists the kernelbox temporary files under dir.
func tempLeft(tb testing.TB, dir string) []string {
	tb.Helper()
	var left []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			left = append(left, p)
		}
		return nil
	})
	return left
}

func TestSessionFilesPutGetListRemove(t *testing.T) {
	m := newManager(t, func(o *Options) { o.DirMode = 0o750; o.FileMode = 0o640 })
	s := openSession(t, m, "s1")
	ctx := context.Background()

	n, err := s.Put(ctx, "data/deep/er/a.csv", strings.NewReader("x,y\n1,2\n"), api.PutOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, 8, n)
	assert.Equal(t, "x,y\n1,2\n", readFile(t, filepath.Join(s.Dir(), "data/deep/er/a.csv")))
	fi, err := os.Stat(filepath.Join(s.Dir(), "data/deep"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o750), fi.Mode().Perm())
	fi, err = os.Stat(filepath.Join(s.Dir(), "data/deep/er/a.csv"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())

	// Overwrite, then a no-overwrite upload that is refused and leaves the file.
	_, err = s.Put(ctx, "data/deep/er/a.csv", strings.NewReader("new"), api.PutOptions{})
	require.NoError(t, err)
	_, err = s.Put(ctx, "data/deep/er/a.csv", strings.NewReader("other"), api.PutOptions{NoOverwrite: true})
	require.ErrorIs(t, err, ErrFileExists)
	require.ErrorIs(t, err, api.ErrExists)
	_, err = s.Put(ctx, "data/fresh.txt", strings.NewReader("fresh"), api.PutOptions{NoOverwrite: true})
	require.NoError(t, err)

	f, err := s.Get("data/deep/er/a.csv")
	require.NoError(t, err)
	b, err := io.ReadAll(f)
	f.Close()
	require.NoError(t, err)
	assert.Equal(t, "new", string(b))
	assert.Empty(t, tempLeft(t, s.Dir()))

	l, err := s.List("data", 0)
	require.NoError(t, err)
	assert.False(t, l.Truncated)
	require.Len(t, l.Entries, 2)
	assert.Equal(t, "deep", l.Entries[0].Name)
	assert.Equal(t, "dir", l.Entries[0].Type)
	assert.Equal(t, api.FileEntry{Name: "fresh.txt", Type: "file", Size: 5, ModTime: l.Entries[1].ModTime}, l.Entries[1])
	assert.WithinDuration(t, time.Now(), l.Entries[1].ModTime, time.Minute)

	root, err := s.List("", 0)
	require.NoError(t, err)
	var names []string
	for _, e := range root.Entries {
		names = append(names, e.Name)
	}
	assert.Equal(t, []string{"data", "inputs", "outputs"}, names)
	cut, err := s.List("", 2)
	require.NoError(t, err)
	assert.True(t, cut.Truncated)
	assert.Len(t, cut.Entries, 2)

	require.ErrorIs(t, s.Remove("data", false), ErrIsDirectory)
	require.NoError(t, s.Remove("data/fresh.txt", false))
	require.ErrorIs(t, s.Remove("data/fresh.txt", false), ErrNotFound)
	require.NoError(t, s.Remove("data", true))
	assert.NoDirExists(t, filepath.Join(s.Dir(), "data"))
}

// TestSessionFilesRefused holds every way out of the session directory, or
// into something that is not a regular file, to its named error, and checks
// that nothing outside was read or written.
func TestSessionFilesRefused(t *testing.T) {
	m := newManager(t, nil)
	s := openSession(t, m, "s1")
	ctx := context.Background()
	host := t.TempDir()
	secret := filepath.Join(host, "secret")
	writeFile(t, secret, "host secret")
	// What the kernel plants: links to a host file and a host directory, a FIFO,
	// a socket, and a plain file used as a directory.
	require.NoError(t, os.Symlink(secret, filepath.Join(s.Dir(), "link")))
	require.NoError(t, os.Symlink(host, filepath.Join(s.Dir(), "linkdir")))
	require.NoError(t, os.Symlink("outputs", filepath.Join(s.Dir(), "inlink")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(s.Dir(), "fifo"), 0o644))
	writeFile(t, filepath.Join(s.Dir(), "plain"), "plain")

	long := strings.Repeat("n", 256)
	deep := strings.Repeat("d/", 2100) + "f"
	cases := []struct {
		path string
		get  error
		put  error
	}{
		{"../x", ErrInvalidPath, ErrInvalidPath},
		{"outputs/../../x", ErrInvalidPath, ErrInvalidPath},
		{"/etc/passwd", ErrInvalidPath, ErrInvalidPath},
		{secret, ErrInvalidPath, ErrInvalidPath},
		{"", ErrInvalidPath, ErrInvalidPath},
		{"a//b", ErrInvalidPath, ErrInvalidPath},
		{"./a", ErrInvalidPath, ErrInvalidPath},
		{"a\x00b", ErrInvalidPath, ErrInvalidPath},
		{"bad\xff\xfe", ErrInvalidPath, ErrInvalidPath},
		{long, ErrInvalidPath, ErrInvalidPath},
		{deep, ErrInvalidPath, ErrInvalidPath},
		{".kb-tmp-0123", ErrInvalidPath, ErrInvalidPath},
		{"linkdir/secret", ErrInvalidPath, ErrInvalidPath},
		{"inlink/x", ErrInvalidPath, ErrInvalidPath},
		{"link", ErrInvalidPath, nil}, // Put replaces the link itself
		{"fifo", ErrInvalidPath, nil}, // and the FIFO
		{"outputs", ErrIsDirectory, ErrIsDirectory},
		{"plain/x", ErrNotDirectory, ErrNotDirectory},
		{"missing/x", ErrNotFound, nil},
		{"absent", ErrNotFound, nil},
	}
	for _, c := range cases {
		name := c.path
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				f, err := s.Get(c.path)
				if f != nil {
					f.Close()
				}
				assert.ErrorIs(t, err, c.get)
				if c.get == ErrInvalidPath {
					assert.ErrorIs(t, err, api.ErrInvalidPath)
				}
				_, err = s.Put(ctx, c.path, strings.NewReader("planted"), api.PutOptions{})
				if c.put == nil {
					assert.NoError(t, err)
				} else {
					assert.ErrorIs(t, err, c.put)
				}
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("blocked (opened a FIFO?)")
			}
		})
	}
	assert.Equal(t, "host secret", readFile(t, secret))
	entries, err := os.ReadDir(host)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "nothing was written to the host directory")
	// The link was replaced by a file, the target untouched.
	fi, err := os.Lstat(filepath.Join(s.Dir(), "link"))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular())
	assert.Empty(t, tempLeft(t, s.Dir()))

	// Remove of a link removes the link, not its target.
	require.NoError(t, s.Remove("linkdir", true))
	assert.FileExists(t, secret)
	_, err = s.List("plain", 0)
	require.ErrorIs(t, err, ErrNotDirectory)
	_, err = s.List("inlink", 0)
	require.ErrorIs(t, err, ErrInvalidPath)
}

func TestSessionFilesTooLargeLeavesNothing(t *testing.T) {
	m := newManager(t, func(o *Options) { o.MaxFileBytes = 1000 })
	s := openSession(t, m, "s1")
	_, err := s.Put(context.Background(), "outputs/big", bytes.NewReader(make([]byte, 1001)), api.PutOptions{})
	require.ErrorIs(t, err, ErrTooLarge)
	require.ErrorIs(t, err, api.ErrTooLarge)
	assert.NoFileExists(t, filepath.Join(s.Dir(), "outputs/big"))
	assert.Empty(t, tempLeft(t, s.Dir()))
	_, err = s.Put(context.Background(), "outputs/ok", bytes.NewReader(make([]byte, 1000)), api.PutOptions{})
	require.NoError(t, err)
	_, err = s.Put(context.Background(), "outputs/small", bytes.NewReader(make([]byte, 11)), api.PutOptions{MaxBytes: 10})
	require.ErrorIs(t, err, ErrTooLarge)
}

// TestSessionFilesQuota uploads past the session's own disk (Options.DiskQuota):
// the upload fails with ErrQuota and leaves no partial file, and the space is
// there again for the next one.
func TestSessionFilesQuota(t *testing.T) {
	const quota = 32 << 20
	m := newManager(t, func(o *Options) { o.DiskQuota = quota })
	s := openSession(t, m, "s1")
	if !requireDisks(t, m) {
		t.Skip("no session disks without root: the quota is only checked after each call")
	}
	_, err := s.Put(context.Background(), "inputs/big", bytes.NewReader(make([]byte, 64<<20)), api.PutOptions{})
	require.ErrorIs(t, err, ErrQuota)
	require.ErrorIs(t, err, api.ErrQuota)
	code, status := api.CodeOf(err)
	assert.Equal(t, api.CodeQuota, code)
	assert.Equal(t, 507, status)
	assert.NoFileExists(t, filepath.Join(s.Dir(), "inputs/big"))
	assert.Empty(t, tempLeft(t, s.Dir()))
	require.NoError(t, syncFS(s.Dir()))
	n, err := s.Put(context.Background(), "inputs/fits", bytes.NewReader(make([]byte, 16<<20)), api.PutOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, 16<<20, n)
}

// TestSessionFilesTakeTheDirectorysOwner: as root, what Put makes in a
// directory another uid owns (a docker kernel's) belongs to that uid, so the
// kernel can change it.
func TestSessionFilesTakeTheDirectorysOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own files as another uid")
	}
	m := newManager(t, nil)
	s := openSession(t, m, "s1")
	require.NoError(t, os.Chown(filepath.Join(s.Dir(), "outputs"), 65534, 65534))
	_, err := s.Put(context.Background(), "outputs/new/dir/f.txt", strings.NewReader("x"), api.PutOptions{})
	require.NoError(t, err)
	for _, p := range []string{"outputs/new", "outputs/new/dir", "outputs/new/dir/f.txt"} {
		fi, err := os.Lstat(filepath.Join(s.Dir(), p))
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		assert.Equal(t, [2]uint32{65534, 65534}, [2]uint32{st.Uid, st.Gid}, p)
	}
	_, err = s.Put(context.Background(), "mine.txt", strings.NewReader("x"), api.PutOptions{})
	require.NoError(t, err)
	fi, err := os.Lstat(filepath.Join(s.Dir(), "mine.txt"))
	require.NoError(t, err)
	assert.EqualValues(t, os.Geteuid(), fi.Sys().(*syscall.Stat_t).Uid)
}
