package kernelfs

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
)

// get reads path whole through Files.Get.
func get(ctx context.Context, f *Files, path string) ([]byte, error) {
	rc, size, err := f.Get(ctx, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err == nil && int64(len(b)) != size {
		err = errors.New("size differs from Get's")
	}
	return b, err
}

func quoted(s string) string { return strconv.Quote(s) }

// TestFilesRoundTrip: uploads of several chunks (and of none) arrive whole in the
// kernel's session directory, parents made; downloads are byte-identical; list
// and remove see what the kernel sees; no temporary file is left.
func TestFilesRoundTrip(t *testing.T) {
	r := newRig(t, func(o *Options) { o.ChunkBytes = 256 << 10; o.PullChunkBytes = 256 << 10 })
	ctx := context.Background()
	f := r.s.Files(r.conn, Limits{})
	data := make([]byte, 3<<20+12345)
	_, _ = rand.Read(data)
	n, err := f.Put(ctx, "inputs/a/b/big.bin", bytes.NewReader(data), api.PutOptions{})
	require.NoError(t, err)
	require.EqualValues(t, len(data), n)
	require.Equal(t, sha256hex(data)+"\n", r.run(t, "import hashlib\nprint(hashlib.sha256(open('inputs/a/b/big.bin','rb').read()).hexdigest())"))
	n, err = f.Put(ctx, "empty", strings.NewReader(""), api.PutOptions{})
	require.NoError(t, err)
	require.Zero(t, n)

	out := r.run(t, "import os, hashlib\nd = os.urandom(1_000_003)\nopen('outputs/k.bin','wb').write(d)\nprint(hashlib.sha256(d).hexdigest())")
	got, err := get(ctx, f, "outputs/k.bin")
	require.NoError(t, err)
	require.Equal(t, out, sha256hex(got)+"\n")
	got, err = get(ctx, f, "empty")
	require.NoError(t, err)
	require.Empty(t, got)

	l, err := f.List(ctx, "", 0)
	require.NoError(t, err)
	var names []string
	for _, e := range l.Entries {
		names = append(names, e.Name+":"+e.Type)
	}
	assert.Equal(t, []string{"empty:file", "inputs:dir", "outputs:dir"}, names, "the marker is not listed")
	l, err = f.List(ctx, "inputs/a/b", 0)
	require.NoError(t, err)
	require.Len(t, l.Entries, 1)
	assert.Equal(t, api.FileEntry{Name: "big.bin", Type: "file", Size: int64(len(data)), ModTime: l.Entries[0].ModTime}, l.Entries[0])

	require.ErrorIs(t, f.Remove(ctx, "inputs/a", false), api.ErrIsDirectory)
	require.NoError(t, f.Remove(ctx, "inputs/a", true))
	require.ErrorIs(t, f.Remove(ctx, "inputs/a", true), api.ErrNotFound)
	assert.Equal(t, "[]\n", r.run(t, "import os\nprint([n for d, _, fs in os.walk('.') for n in fs if n.startswith('.kb-tmp-') or d.startswith('./inputs/a')])"))

	_, err = f.Put(ctx, "outputs/k.bin", strings.NewReader("x"), api.PutOptions{NoOverwrite: true})
	require.ErrorIs(t, err, api.ErrExists)
}

// TestFilesBadPaths: each bad path, and each link, FIFO or directory the kernel
// planted, is refused with its code, and nothing outside the session directory is
// read or written.
func TestFilesBadPaths(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	f := r.s.Files(r.conn, Limits{})
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("host secret"), 0o644))
	r.run(t, `import os
os.symlink(`+quoted(secret)+`, "link")
os.symlink(`+quoted(outside)+`, "linkdir")
os.mkfifo("fifo")
open("plain", "w").write("x")`)
	cases := []struct {
		path string
		want error
	}{
		{"../x", api.ErrInvalidPath},
		{"outputs/../../x", api.ErrInvalidPath},
		{"/etc/passwd", api.ErrInvalidPath},
		{"a\x00b", api.ErrInvalidPath},
		{"bad\xffname", api.ErrInvalidPath},
		{strings.Repeat("n", 256), api.ErrInvalidPath},
		{strings.Repeat("d/", 2100) + "f", api.ErrInvalidPath},
		{".kernelbox-session", api.ErrInvalidPath},
		{"link", api.ErrInvalidPath},
		{"linkdir/secret.txt", api.ErrInvalidPath},
		{"fifo", api.ErrInvalidPath},
		{"outputs", api.ErrIsDirectory},
		{"plain/x", api.ErrNotDirectory},
		{"missing.txt", api.ErrNotFound},
	}
	for _, c := range cases {
		_, err := get(ctx, f, c.path)
		assert.ErrorIs(t, err, c.want, "get %.30q", c.path)
		assert.NotContains(t, errString(err), "host secret")
	}
	for _, p := range []string{"linkdir/new.txt", "../new.txt", "/tmp/new.txt", "outputs", "plain/x"} {
		_, err := f.Put(ctx, p, strings.NewReader("planted"), api.PutOptions{})
		assert.Error(t, err, p)
	}
	_, err := f.List(ctx, "linkdir", 0)
	assert.ErrorIs(t, err, api.ErrInvalidPath)
	assert.ErrorIs(t, f.Remove(ctx, "linkdir/secret.txt", false), api.ErrInvalidPath)
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "nothing was written outside")
	// An upload to the link replaces the link; its target stays as it was.
	_, err = f.Put(ctx, "link", strings.NewReader("mine"), api.PutOptions{})
	require.NoError(t, err)
	b, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "host secret", string(b))
	assert.Equal(t, "False mine\n", r.run(t, `import os; print(os.path.islink("link"), open("link").read())`))
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestFilesLimits: an upload over the file limit is too_large, one that would take
// the session over its byte budget is quota; neither leaves a file, whole or
// partial, and the budget counts what the kernel's code wrote too.
func TestFilesLimits(t *testing.T) {
	const budget = 2 << 20
	r := newRig(t, func(o *Options) { o.ChunkBytes = 128 << 10 })
	ctx := context.Background()
	f := r.s.Files(r.conn, Limits{MaxFileBytes: 1 << 20, MaxSessionBytes: budget})
	_, err := f.Put(ctx, "inputs/big.bin", bytes.NewReader(make([]byte, 1<<20+1)), api.PutOptions{})
	require.ErrorIs(t, err, api.ErrTooLarge)
	_, err = f.Put(ctx, "inputs/small.bin", bytes.NewReader(make([]byte, 100)), api.PutOptions{MaxBytes: 99})
	require.ErrorIs(t, err, api.ErrTooLarge)

	r.run(t, "open('outputs/written.bin','wb').write(b'x' * 1_500_000)")
	_, err = f.Put(ctx, "inputs/over.bin", bytes.NewReader(make([]byte, 600_000)), api.PutOptions{})
	require.ErrorIs(t, err, api.ErrQuota)
	assert.Contains(t, err.Error(), "budget")
	// Replacing a file counts its new size only.
	_, err = f.Put(ctx, "outputs/written.bin", bytes.NewReader(make([]byte, 1<<20)), api.PutOptions{})
	require.NoError(t, err)
	_, err = f.Put(ctx, "inputs/fits.bin", bytes.NewReader(make([]byte, 500_000)), api.PutOptions{})
	require.NoError(t, err)
	assert.Equal(t, "['inputs/fits.bin', 'outputs/written.bin']\n", r.run(t, `import os
print(sorted(os.path.join(d, n)[2:] for d, _, fs in os.walk(".") for n in fs if not n.startswith(".kernelbox")))`), "no partial file is left")
}

// TestFilesGetSeek: a download sought to an offset (after its head was read)
// gives the file's bytes from there, fetching only what follows (chunks of
// 64 KiB: reading 100 bytes at 3 MiB asks for a Window of chunks from there), and
// seeking outside the file or from elsewhere than the start fails.
func TestFilesGetSeek(t *testing.T) {
	r := newRig(t, func(o *Options) { o.ChunkBytes = 64 << 10; o.PullChunkBytes = 64 << 10 })
	ctx := context.Background()
	f := r.s.Files(r.conn, Limits{})
	data := make([]byte, 4<<20+77)
	_, _ = rand.Read(data)
	_, err := f.Put(ctx, "big.bin", bytes.NewReader(data), api.PutOptions{})
	require.NoError(t, err)

	rc, size, err := f.Get(ctx, "big.bin")
	require.NoError(t, err)
	defer rc.Close()
	require.EqualValues(t, len(data), size)
	head := make([]byte, 512)
	_, err = io.ReadFull(rc, head)
	require.NoError(t, err)
	require.Equal(t, data[:512], head)
	d := rc.(*download)
	const at = 3 << 20
	n, err := rc.(io.Seeker).Seek(at, io.SeekStart)
	require.NoError(t, err)
	require.EqualValues(t, at, n)
	page := make([]byte, 100)
	_, err = io.ReadFull(rc, page)
	require.NoError(t, err)
	assert.Equal(t, data[at:at+100], page)
	assert.LessOrEqual(t, d.off, int64(at+(r.s.o.Window+1)*(64<<10)), "only the chunks after the offset were asked for")
	rest, err := io.ReadAll(rc)
	require.NoError(t, err, "a sought download ends without a checksum mismatch")
	assert.Equal(t, data[at+100:], rest)

	_, err = rc.(io.Seeker).Seek(size+1, io.SeekStart)
	require.Error(t, err)
	rc2, _, err := f.Get(ctx, "big.bin")
	require.NoError(t, err)
	defer rc2.Close()
	_, err = rc2.(io.Seeker).Seek(1, io.SeekCurrent)
	require.Error(t, err)
	n, err = rc2.(io.Seeker).Seek(size, io.SeekStart)
	require.NoError(t, err)
	require.EqualValues(t, size, n)
	b, err := io.ReadAll(rc2)
	require.NoError(t, err)
	require.Empty(t, b)
	assert.Equal(t, "[]\n", r.run(t, "import os\nprint([n for n in os.listdir('.') if n.startswith('.kb-tmp-')])"))
}
