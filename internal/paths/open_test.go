//go:build linux

package paths

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/kernelbox/kernelbox/internal/testkit/swaptest"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// writeFile writes content to path, making its directories.
func writeFile(tb testing.TB, path, content string) {
	tb.Helper()
	require.NoError(tb, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(tb, os.WriteFile(path, []byte(content), 0o644))
}

// TestOpenNoFollow checks both ways of opening (openat2 and the walk used without
// it) against links at every position.
func TestOpenNoFollow(t *testing.T) {
	base := t.TempDir()
	writeFile(t, filepath.Join(base, "d", "x"), "public")
	require.NoError(t, os.Symlink(filepath.Join(base, "d"), filepath.Join(base, "l")))
	require.NoError(t, os.Symlink(filepath.Join(base, "d", "x"), filepath.Join(base, "d", "lx")))
	held, err := os.Open(filepath.Join(base, "d", "x"))
	require.NoError(t, err)
	t.Cleanup(func() { held.Close() })
	magic := filepath.Join("/proc", strconv.Itoa(os.Getpid()), "fd", strconv.Itoa(int(held.Fd())))

	openers := map[string]func(string, int) (*os.File, error){
		"openat2": openNoFollow,
		"walk":    walkNoFollow,
	}
	cases := []struct {
		name, path string
		want       error // nil: opens and reads "public"
	}{
		{"plain", filepath.Join(base, "d", "x"), nil},
		{"link last", filepath.Join(base, "d", "lx"), ErrLinkInPath},
		{"link in the middle", filepath.Join(base, "l", "x"), ErrLinkInPath},
		{"magic link", magic, ErrLinkInPath},
		{"through /proc/self", "/proc/self/fd/" + strconv.Itoa(int(held.Fd())), ErrLinkInPath},
		{"missing", filepath.Join(base, "d", "nope"), fs.ErrNotExist},
	}
	for oname, open := range openers {
		for _, tc := range cases {
			t.Run(oname+"/"+tc.name, func(t *testing.T) {
				f, err := open(tc.path, ReadFlags)
				if tc.want != nil {
					require.ErrorIs(t, err, tc.want)
					return
				}
				require.NoError(t, err)
				defer f.Close()
				b, err := io.ReadAll(f)
				require.NoError(t, err)
				require.Equal(t, "public", string(b))
			})
		}
	}
	_, err = OpenNoFollow("relative/x")
	require.Error(t, err)
}

// TestWalkSwapRace runs the swap race against the walk that replaces openat2 on
// kernels without it: 1,000 opens, none may reach the secret.
func TestWalkSwapRace(t *testing.T) {
	base := t.TempDir()
	d, l := filepath.Join(base, "d"), filepath.Join(base, "l")
	writeFile(t, filepath.Join(d, "x"), "public")
	writeFile(t, filepath.Join(base, "secret", "x"), "SECRET")
	require.NoError(t, os.Symlink(filepath.Join(base, "secret"), l))

	swaptest.Race(t, d, l, 1000, func() (ok, leaked bool) {
		f, err := walkNoFollow(filepath.Join(d, "x"), ReadFlags)
		if err != nil {
			return false, false
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		require.NoError(t, err)
		return true, string(b) == "SECRET"
	})
}

// TestOpenBeneath checks both ways of opening below a directory handle (openat2
// and the walk) against a link at every component, a magic link, "..", NUL,
// invalid UTF-8 and over-long paths: each is refused, and nothing outside the
// directory is ever opened.
func TestOpenBeneath(t *testing.T) {
	base := t.TempDir()
	top := filepath.Join(base, "top")
	writeFile(t, filepath.Join(top, "a", "b", "x"), "inside")
	writeFile(t, filepath.Join(base, "secret", "b", "x"), "SECRET")
	require.NoError(t, os.Symlink(filepath.Join(base, "secret"), filepath.Join(top, "la")))                     // first component
	require.NoError(t, os.Symlink(filepath.Join(base, "secret", "b"), filepath.Join(top, "a", "lb")))           // middle
	require.NoError(t, os.Symlink(filepath.Join(base, "secret", "b", "x"), filepath.Join(top, "a", "b", "lx"))) // last
	require.NoError(t, os.Symlink("b", filepath.Join(top, "a", "rel")))                                         // relative, stays inside
	d, err := os.Open(top)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	dir := int(d.Fd())

	cases := []struct {
		name, rel string
		want      error // nil: opens and reads "inside"
	}{
		{"plain", "a/b/x", nil},
		{"link first", "la/b/x", ErrLinkInPath},
		{"link in the middle", "a/lb/x", ErrLinkInPath},
		{"link last", "a/b/lx", ErrLinkInPath},
		{"link inside", "a/rel/x", ErrLinkInPath},
		{"dotdot", "../secret/b/x", ErrInvalidPath},
		{"dotdot inside", "a/../a/b/x", ErrInvalidPath},
		{"absolute", "/etc/passwd", ErrInvalidPath},
		{"empty element", "a//b/x", ErrInvalidPath},
		{"NUL", "a/b/x\x00", ErrInvalidPath},
		{"invalid UTF-8", "a/\xff/x", ErrInvalidPath},
		{"long element", "a/" + longName(256), ErrInvalidPath},
		{"long path", longPath(MaxPathBytes + 1), ErrInvalidPath},
		{"missing", "a/b/nope", fs.ErrNotExist},
	}
	for _, mode := range []string{"openat2", "walk"} {
		for _, tc := range cases {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				if mode == "walk" {
					defer UseWalk()()
				}
				fd, err := OpenBeneath(dir, tc.rel, unix.O_RDONLY)
				if tc.want != nil {
					if err == nil {
						unix.Close(fd)
					}
					require.ErrorIs(t, err, tc.want)
					return
				}
				require.NoError(t, err)
				f := os.NewFile(uintptr(fd), tc.rel)
				defer f.Close()
				b, err := io.ReadAll(f)
				require.NoError(t, err)
				require.Equal(t, "inside", string(b))
			})
		}
	}
	fd, err := OpenBeneath(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY)
	require.NoError(t, err, "the directory itself")
	unix.Close(fd)
}

func longName(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'n'
	}
	return string(b)
}

// longPath is a path of n bytes of short elements.
func longPath(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'd'
		if i%2 == 1 {
			b[i] = '/'
		}
	}
	b[n-1] = 'f'
	return string(b)
}
