package workspace

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStage(t *testing.T) {
	t.Parallel()
	for _, noHash := range []bool{false, true} {
		m := newManager(t, func(o *Options) { o.HashInputs = !noHash })
		s := openSession(t, m, "s1")
		src := filepath.Join(t.TempDir(), "data.csv")
		writeFile(t, src, "a,b\n1,2\n")

		staged, err := s.Stage([]Input{{Name: "data.csv", Source: src, Requested: "~/data.csv"}})
		require.NoError(t, err)
		want := Staged{Name: "data.csv", Size: 8, SHA256: sha("a,b\n1,2\n")}
		if noHash {
			want.SHA256 = ""
		}
		assert.Equal(t, []Staged{want}, staged)
		dst := filepath.Join(s.Dir(), "inputs", "data.csv")
		assert.Equal(t, "a,b\n1,2\n", readFile(t, dst))
		fi, err := os.Lstat(dst)
		require.NoError(t, err)
		assert.Equal(t, DefaultFileMode, fi.Mode())
		assert.Equal(t, []string{"data.csv"}, dirNames(t, filepath.Join(s.Dir(), "inputs")))
	}
}

// TestStageRejects stages one bad input into a session that already holds
// keep.txt, and checks the exact error and that nothing changed in inputs/.
func TestStageRejects(t *testing.T) {
	t.Parallel()
	type setup func(t *testing.T, dir string) []Input
	one := func(name, source, requested string) []Input {
		return []Input{{Name: name, Source: source, Requested: requested}}
	}
	regular := func(t *testing.T, dir, name, content string) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, content)
		return p
	}
	tests := []struct {
		name    string
		opts    func(*Options)
		inputs  setup
		is      error
		message string
	}{
		{
			name:    "missing file",
			inputs:  func(t *testing.T, dir string) []Input { return one("x.csv", filepath.Join(dir, "nope"), "nope.csv") },
			is:      fs.ErrNotExist,
			message: `stage input "nope.csv": no such file or directory`,
		},
		{
			name:    "directory",
			inputs:  func(t *testing.T, dir string) []Input { return one("d", dir, "/tmp/x") },
			is:      ErrNotRegular,
			message: `stage input "/tmp/x": is a directory, not a regular file`,
		},
		{
			name: "fifo",
			inputs: func(t *testing.T, dir string) []Input {
				p := filepath.Join(dir, "fifo")
				require.NoError(t, syscall.Mkfifo(p, 0o644))
				return one("fifo", p, "fifo")
			},
			is:      ErrNotRegular,
			message: `stage input "fifo": is a named pipe (FIFO), not a regular file`,
		},
		{
			name:    "device",
			inputs:  func(t *testing.T, dir string) []Input { return one("null", "/dev/null", "/dev/null") },
			is:      ErrNotRegular,
			message: `stage input "/dev/null": is a character device, not a regular file`,
		},
		{
			name: "socket",
			inputs: func(t *testing.T, dir string) []Input {
				// Unix socket paths are limited to ~108 bytes; t.TempDir can be longer.
				sdir, err := os.MkdirTemp("", "kbsock")
				require.NoError(t, err)
				t.Cleanup(func() { os.RemoveAll(sdir) })
				p := filepath.Join(sdir, "s")
				l, err := net.Listen("unix", p)
				require.NoError(t, err)
				t.Cleanup(func() { l.Close() })
				return one("sock", p, "sock")
			},
			is:      ErrNotRegular,
			message: `stage input "sock": is a socket, not a regular file`,
		},
		{
			name: "symlink as source",
			inputs: func(t *testing.T, dir string) []Input {
				target := regular(t, dir, "target", "secret")
				p := filepath.Join(dir, "link")
				require.NoError(t, os.Symlink(target, p))
				return one("link", p, "link.csv")
			},
			is:      ErrNotRegular,
			message: `stage input "link.csv": is a symbolic link, not a regular file`,
		},
		{
			name:    "requested path falls back to source",
			inputs:  func(t *testing.T, dir string) []Input { return one("d", dir, "") },
			is:      ErrNotRegular,
			message: `stage input "` + "%DIR%" + `": is a directory, not a regular file`,
		},
		{
			name: "duplicate names",
			inputs: func(t *testing.T, dir string) []Input {
				return []Input{
					{Name: "data.csv", Source: regular(t, dir, "a", "first"), Requested: "a/data.csv"},
					{Name: "other.csv", Source: regular(t, dir, "o", "other"), Requested: "other.csv"},
					{Name: "data.csv", Source: regular(t, dir, "b", "second"), Requested: "b/data.csv"},
				}
			},
			is:      ErrDuplicateName,
			message: `stage inputs: "a/data.csv" and "b/data.csv" would both be inputs/data.csv: duplicate input name`,
		},
		{
			name:    "name with slash",
			inputs:  func(t *testing.T, dir string) []Input { return one("a/b", regular(t, dir, "f", "x"), "f") },
			is:      ErrInvalidName,
			message: `stage input "f": name "a/b": contains '/': invalid file name`,
		},
		{
			name:    "name dot dot",
			inputs:  func(t *testing.T, dir string) []Input { return one("..", regular(t, dir, "f", "x"), "f") },
			is:      ErrInvalidName,
			message: `stage input "f": name "..": not a file name: invalid file name`,
		},
		{
			name:    "name dot",
			inputs:  func(t *testing.T, dir string) []Input { return one(".", regular(t, dir, "f", "x"), "f") },
			is:      ErrInvalidName,
			message: `stage input "f": name ".": not a file name: invalid file name`,
		},
		{
			name:    "empty name",
			inputs:  func(t *testing.T, dir string) []Input { return one("", regular(t, dir, "f", "x"), "f") },
			is:      ErrInvalidName,
			message: `stage input "f": name "": empty: invalid file name`,
		},
		{
			name:    "name with NUL",
			inputs:  func(t *testing.T, dir string) []Input { return one("a\x00b", regular(t, dir, "f", "x"), "f") },
			is:      ErrInvalidName,
			message: `stage input "f": name "a\x00b": contains NUL: invalid file name`,
		},
		{
			name: "too big for the per-file limit",
			opts: func(o *Options) { o.MaxFileBytes = 10 },
			inputs: func(t *testing.T, dir string) []Input {
				return one("big", regular(t, dir, "big", "0123456789x"), "big.bin")
			},
			is:      ErrTooLarge,
			message: `stage input "big.bin": 11 bytes, over the 10-byte per-file limit: too large`,
		},
		{
			name: "over the session limit",
			opts: func(o *Options) { o.MaxSessionBytes = 10 },
			inputs: func(t *testing.T, dir string) []Input {
				// keep.txt already holds 4 bytes.
				return []Input{
					{Name: "a", Source: regular(t, dir, "a", "abc"), Requested: "a"},
					{Name: "b", Source: regular(t, dir, "b", "abcd"), Requested: "b"},
				}
			},
			is:      ErrSessionLimit,
			message: `stage inputs: 7 more bytes would bring the session's inputs from 4 to 11 bytes, over the 10-byte session limit: session input limit exceeded`,
		},
		{
			// /proc files report size 0 to fstat and then yield content: exactly a
			// file that grows between the check and the copy.
			name: "grows while copied",
			opts: func(o *Options) { o.MaxFileBytes = 100 },
			inputs: func(t *testing.T, dir string) []Input {
				return one("status", "/proc/"+strconv.Itoa(os.Getpid())+"/status", "status")
			},
			is:      ErrTooLarge,
			message: `stage input "status": grew past the 100-byte per-file limit while being copied: too large`,
		},
		{
			name: "grows while copied without hashing",
			opts: func(o *Options) { o.MaxFileBytes = 100; o.HashInputs = false },
			inputs: func(t *testing.T, dir string) []Input {
				return one("status", "/proc/"+strconv.Itoa(os.Getpid())+"/status", "status")
			},
			is:      ErrTooLarge,
			message: `stage input "status": grew past the 100-byte per-file limit while being copied: too large`,
		},
		{
			name: "a later bad input stops the good ones",
			inputs: func(t *testing.T, dir string) []Input {
				return []Input{
					{Name: "good", Source: regular(t, dir, "good", "good"), Requested: "good"},
					{Name: "bad", Source: filepath.Join(dir, "missing"), Requested: "missing"},
				}
			},
			is:      fs.ErrNotExist,
			message: `stage input "missing": no such file or directory`,
		},
		{
			name: "destination is a directory",
			inputs: func(t *testing.T, dir string) []Input {
				return []Input{
					{Name: "good", Source: regular(t, dir, "good", "good"), Requested: "good"},
					{Name: "keep.txt", Source: regular(t, dir, "k", "new"), Requested: "k"},
					{Name: "sub", Source: regular(t, dir, "sub", "sub"), Requested: "sub"},
				}
			},
			is:      ErrNotRegular,
			message: `stage input "sub": destination inputs/sub: is a directory, not a regular file`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, tt.opts)
			s := openSession(t, m, "s")
			srcDir := t.TempDir()
			keep := filepath.Join(srcDir, "keep.txt")
			writeFile(t, keep, "keep")
			_, err := s.Stage([]Input{{Name: "keep.txt", Source: keep}})
			require.NoError(t, err)
			inputs := filepath.Join(s.Dir(), "inputs")
			require.NoError(t, os.Mkdir(filepath.Join(inputs, "sub"), 0o755))

			staged, err := s.Stage(tt.inputs(t, srcDir))
			require.Error(t, err)
			assert.Nil(t, staged)
			assert.ErrorIs(t, err, tt.is)
			assert.Equal(t, strings.ReplaceAll(tt.message, "%DIR%", srcDir), err.Error())

			assert.Equal(t, []string{"keep.txt", "sub"}, dirNames(t, inputs), "nothing added, nothing left half-copied")
			assert.Equal(t, "keep", readFile(t, filepath.Join(inputs, "keep.txt")), "earlier input untouched")
			assert.Equal(t, int64(4), s.stagedBytes())
		})
	}
}

func TestStageDoesNotBlockOnFIFO(t *testing.T) {
	t.Parallel()
	// Covered by TestStageRejects; this one also runs the open path directly, in
	// case the FIFO appears after the Lstat.
	p := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(p, 0o644))
	f, err := os.OpenFile(p, openReadFlags, 0)
	require.NoError(t, err, "O_NONBLOCK open of a FIFO returns at once")
	f.Close()
}

func TestStageReplacesPlantedSymlink(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	outside := filepath.Join(t.TempDir(), "victim.txt")
	writeFile(t, outside, "precious")
	// The kernel plants inputs/data.csv -> the outside file.
	require.NoError(t, os.Symlink(outside, filepath.Join(s.Dir(), "inputs", "data.csv")))

	src := filepath.Join(t.TempDir(), "data.csv")
	writeFile(t, src, "fresh")
	_, err := s.Stage([]Input{{Name: "data.csv", Source: src}})
	require.NoError(t, err)

	assert.Equal(t, "precious", readFile(t, outside), "outside file unchanged")
	dst := filepath.Join(s.Dir(), "inputs", "data.csv")
	fi, err := os.Lstat(dst)
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "the link was replaced by a regular file")
	assert.Equal(t, "fresh", readFile(t, dst))
}

func TestStageReplacesTamperedInputsDir(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		tamper func(t *testing.T, inputs, outside string)
	}{
		{"symlink to outside dir", func(t *testing.T, inputs, outside string) {
			require.NoError(t, os.RemoveAll(inputs))
			require.NoError(t, os.Symlink(outside, inputs))
		}},
		{"relative symlink inside the session", func(t *testing.T, inputs, outside string) {
			require.NoError(t, os.RemoveAll(inputs))
			require.NoError(t, os.Symlink("outputs", inputs))
		}},
		{"regular file", func(t *testing.T, inputs, outside string) {
			require.NoError(t, os.RemoveAll(inputs))
			writeFile(t, inputs, "not a dir")
		}},
		{"fifo", func(t *testing.T, inputs, outside string) {
			require.NoError(t, os.RemoveAll(inputs))
			require.NoError(t, syscall.Mkfifo(inputs, 0o644))
		}},
		{"missing", func(t *testing.T, inputs, outside string) {
			require.NoError(t, os.RemoveAll(inputs))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, nil)
			s := openSession(t, m, "s")
			outside := t.TempDir()
			inputs := filepath.Join(s.Dir(), "inputs")
			tt.tamper(t, inputs, outside)

			src := filepath.Join(t.TempDir(), "x.txt")
			writeFile(t, src, "x")
			_, err := s.Stage([]Input{{Name: "x.txt", Source: src}})
			require.NoError(t, err)

			assert.Empty(t, dirNames(t, outside), "nothing written outside")
			assert.Empty(t, dirNames(t, filepath.Join(s.Dir(), "outputs")), "nothing written through an in-session link")
			fi, err := os.Lstat(inputs)
			require.NoError(t, err)
			assert.True(t, fi.IsDir(), "inputs/ is a real directory again")
			assert.Equal(t, "x", readFile(t, filepath.Join(inputs, "x.txt")))
		})
	}
}

func TestStageRestageCountsOnce(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(o *Options) { o.MaxSessionBytes = 10 })
	s := openSession(t, m, "s")
	src := filepath.Join(t.TempDir(), "f")
	writeFile(t, src, "123456")
	for range 3 {
		_, err := s.Stage([]Input{{Name: "f", Source: src}})
		require.NoError(t, err, "restaging a name replaces its size")
	}
	assert.Equal(t, int64(6), s.stagedBytes())

	// A reopened session counts what inputs/ already holds.
	s2 := openSession(t, m, "s")
	assert.Equal(t, int64(6), s2.stagedBytes())
	other := filepath.Join(t.TempDir(), "g")
	writeFile(t, other, "12345")
	_, err := s2.Stage([]Input{{Name: "g", Source: other}})
	assert.ErrorIs(t, err, ErrSessionLimit)
}

// TestStageCommitRollsBack makes the second rename of a Stage fail and checks that
// the first is undone, restoring the file staged before.
func TestStageCommitRollsBack(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	inputs := filepath.Join(s.Dir(), "inputs")
	writeFile(t, filepath.Join(inputs, "a"), "old a")
	writeFile(t, filepath.Join(inputs, ".kb-tmp-1"), "new a")
	writeFile(t, filepath.Join(inputs, ".kb-tmp-2"), "new b")
	require.NoError(t, os.Mkdir(filepath.Join(inputs, "b"), 0o755)) // raced in after the checks

	dir, err := os.OpenRoot(inputs)
	require.NoError(t, err)
	defer dir.Close()
	items := []*stageItem{
		{in: Input{Name: "a"}, tmp: ".kb-tmp-1"},
		{in: Input{Name: "b"}, tmp: ".kb-tmp-2"},
	}
	err = commit(dir, items)
	require.Error(t, err)
	assert.Equal(t, "old a", readFile(t, filepath.Join(inputs, "a")), "first rename undone")
	assert.Equal(t, []string{".kb-tmp-2", "a", "b"}, dirNames(t, inputs), "backup link removed")
}

// TestStageCommitRestoresFailedName: the rename that fails comes after its name was
// removed (see commit); the file that was there is put back.
func TestStageCommitRestoresFailedName(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	inputs := filepath.Join(s.Dir(), "inputs")
	writeFile(t, filepath.Join(inputs, "a"), "old a")
	writeFile(t, filepath.Join(inputs, "b"), "old b")
	writeFile(t, filepath.Join(inputs, ".kb-tmp-1"), "new a")

	dir, err := os.OpenRoot(inputs)
	require.NoError(t, err)
	defer dir.Close()
	items := []*stageItem{
		{in: Input{Name: "a"}, tmp: ".kb-tmp-1"},
		{in: Input{Name: "b"}, tmp: ".kb-tmp-gone"}, // removed from under the Stage
	}
	err = commit(dir, items)
	require.Error(t, err)
	assert.Equal(t, "old a", readFile(t, filepath.Join(inputs, "a")))
	assert.Equal(t, "old b", readFile(t, filepath.Join(inputs, "b")), "failed name restored")
	assert.Equal(t, []string{"a", "b"}, dirNames(t, inputs))
}

func TestStageClosedSession(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s, err := m.Open("s")
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = s.Stage([]Input{{Name: "x", Source: "/etc/hostname"}})
	assert.True(t, errors.Is(err, ErrClosed))
}

func TestOpenSweepsStageLeftovers(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	inputs := filepath.Join(s.Dir(), "inputs")
	writeFile(t, filepath.Join(inputs, ".kb-tmp-0123456789abcdef"), "half a file")
	writeFile(t, filepath.Join(inputs, "kept.csv"), "kept")
	openSession(t, m, "s")
	assert.Equal(t, []string{"kept.csv"}, dirNames(t, inputs))
}
