package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/kernelbox/kernelbox/internal/paths"
)

// renameFaults is a Manager.adoptRename that fails chosen renames with EIO: the
// failAt-th move of an entry into the warm directory (counted from 1), and then,
// while AdoptFiles undoes, the putting back of the first strand entries it moved.
// Every other rename is the real one. The warm directory of these tests has no
// data/, so each move is of one top-level entry, by its own name.
type renameFaults struct {
	failAt, strand int
	moved          []string // the entries moved into the warm directory, in order
	failed         bool     // the move failed: the calls since are the undo's
}

func (f *renameFaults) rename(from int, name string, to int, newName string) error {
	if !f.failed {
		if len(f.moved)+1 == f.failAt {
			f.failed = true
			return unix.EIO
		}
		f.moved = append(f.moved, name)
		return renameNoReplace(from, name, to, newName)
	}
	if slices.Contains(f.stranded(), name) {
		return unix.EIO
	}
	return renameNoReplace(from, name, to, newName)
}

// stranded returns the entries that cannot be put back.
func (f *renameFaults) stranded() []string { return f.moved[:min(f.strand, len(f.moved))] }

// A move that fails midway, and whose undo fails for some entries, ends in an error
// wrapping ErrStranded that names the warm directory: the entries that could be put
// back are in the session's directory, the others in the warm one, and no file is
// lost. The Manager goes on working.
func TestAdoptFilesStranded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		failAt, strand int // failAt 0: the last entry's move fails
	}{
		{"second move fails, first entry stranded", 2, 1},
		{"last move fails, two entries stranded", 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, nil)
			dir := hibernatedDir(t, m, "sleeper", hostDataDir(t, "old copy"))
			warm, err := m.Warm()
			require.NoError(t, err)
			before := treeOf(t, dir)
			faults := &renameFaults{failAt: tc.failAt, strand: tc.strand}
			if faults.failAt == 0 {
				faults.failAt = len(dirNames(t, dir))
			}
			m.adoptRename = faults.rename

			_, err = m.AdoptFiles(warm, "sleeper")
			m.adoptRename = nil
			require.ErrorIs(t, err, ErrStranded)
			require.ErrorIs(t, err, unix.EIO)
			assert.Contains(t, err.Error(), warm.Dir(), "the error names the warm directory")
			stranded := faults.stranded()
			require.Len(t, stranded, tc.strand)
			for _, name := range stranded {
				assert.Contains(t, err.Error(), "put back "+name+":", "the error names what is stranded")
			}
			t.Logf("moved %q, stranded %q: %v", faults.moved, stranded, err)

			// Every file of the session is in exactly one of the two places.
			inSession, inWarm := treeOf(t, dir), treeOf(t, warm.Dir())
			for p, what := range before {
				if p == "." {
					continue
				}
				top, _, _ := strings.Cut(p, string(filepath.Separator))
				if slices.Contains(stranded, top) {
					assert.Equal(t, what, inWarm[p], "%s: stranded in the warm directory", p)
					assert.NotContains(t, inSession, p)
				} else {
					assert.Equal(t, what, inSession[p], "%s: back in the session directory", p)
				}
			}
			for p := range inSession {
				assert.Contains(t, before, p, "the session directory holds only its own files")
			}
			assert.ElementsMatch(t, []string{"sleeper", warm.ID()}, dirNames(t, filepath.Join(m.Root(), "sessions")))

			// The warm session closes without losing its directory, and the
			// Manager serves other sessions and the stranded one's directory.
			require.NoError(t, warm.Close())
			assert.DirExists(t, warm.Dir())
			other := openSession(t, m, "other")
			writeFile(t, filepath.Join(other.Dir(), "outputs", "o.txt"), "o")
			require.NoError(t, other.Close())
			again := openSession(t, m, "sleeper")
			assert.Equal(t, dir, again.Dir())
			require.NoError(t, again.Close())
			w2, err := m.Warm()
			require.NoError(t, err)
			s, err := m.Adopt(w2, "fresh")
			require.NoError(t, err)
			require.NoError(t, s.Close())
		})
	}
}

// A move that fails midway, and whose undo succeeds, puts every entry back, leaves
// the warm directory as it was, and is not ErrStranded: the warm session can then
// adopt the files.
func TestAdoptFilesMoveFailsUndone(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	dir := hibernatedDir(t, m, "sleeper", hostDataDir(t, "old copy"))
	warm, err := m.Warm()
	require.NoError(t, err)
	before, warmBefore := treeOf(t, dir), treeOf(t, warm.Dir())
	faults := &renameFaults{failAt: 4}
	m.adoptRename = faults.rename

	_, err = m.AdoptFiles(warm, "sleeper")
	m.adoptRename = nil
	require.ErrorIs(t, err, unix.EIO)
	require.NotErrorIs(t, err, ErrStranded)
	require.Len(t, faults.moved, 3, "three entries moved before the failure")
	assert.Equal(t, before, treeOf(t, dir), "the session's files are back")
	assert.Equal(t, warmBefore, treeOf(t, warm.Dir()), "the warm directory is as it was")
	assert.ElementsMatch(t, []string{"sleeper", warm.ID()}, dirNames(t, filepath.Join(m.Root(), "sessions")))

	s, err := m.AdoptFiles(warm, "sleeper")
	require.NoError(t, err, "the warm session is still warm")
	assert.Equal(t, "old output", readFile(t, filepath.Join(s.Dir(), "outputs", "old.txt")))
	require.NoError(t, s.Close())
}

// A session whose data/ is a symbolic link or a file, while the warm directory has
// a data/ of the template's copies, is ErrConflict with everything back: the link
// is not followed (its target is left alone), nothing is merged. Both ways paths
// opens are tried (openat2, and the walk of kernels without it): they tell a link
// apart differently (ENOTDIR or ErrLinkInPath).
func TestAdoptFilesDataNotADirectory(t *testing.T) {
	// Not parallel: the walk case changes how paths opens, for the whole process.
	for _, open := range []string{"openat2", "walk"} {
		for _, tc := range []struct {
			name string
			make func(t *testing.T, data string)
		}{
			{"link", func(t *testing.T, data string) {
				target := t.TempDir()
				writeFile(t, filepath.Join(target, "elsewhere.txt"), "not the session's")
				require.NoError(t, os.Symlink(target, data))
			}},
			{"file", func(t *testing.T, data string) { writeFile(t, data, "a file named data") }},
		} {
			t.Run(open+"/"+tc.name, func(t *testing.T) {
				if open == "walk" {
					defer paths.UseWalk()()
				}
				adoptDataNotADirectory(t, tc.make)
			})
		}
	}
}

func adoptDataNotADirectory(t *testing.T, makeData func(t *testing.T, data string)) {
	t.Helper()
	m := newManager(t, nil)
	s := openSession(t, m, "sleeper")
	dir := s.Dir()
	writeFile(t, filepath.Join(dir, "outputs", "old.txt"), "old output")
	makeData(t, filepath.Join(dir, "data"))
	require.NoError(t, s.Close())
	warm, err := m.Warm()
	require.NoError(t, err)
	require.NoError(t, warm.AddData("ds", hostDataDir(t, "warm copy"), 0))
	before, warmBefore := treeOf(t, dir), treeOf(t, warm.Dir())

	_, err = m.AdoptFiles(warm, "sleeper")
	require.ErrorIs(t, err, ErrConflict)
	require.NotErrorIs(t, err, ErrStranded)
	assert.Contains(t, err.Error(), `"data"`)
	assert.Equal(t, before, treeOf(t, dir), "the session's files are back")
	assert.Equal(t, warmBefore, treeOf(t, warm.Dir()), "the warm directory is as it was")
	require.NoError(t, warm.Close())
}
