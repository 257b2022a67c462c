//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernelbox/kernelbox/internal/testkit/swaptest"
	"github.com/stretchr/testify/require"
)

// TestStageSwapRace swaps a real directory on the allowed path with a symlink to a
// secret directory (renameat2 RENAME_EXCHANGE, as a kernel with write access to a
// directory on the path could) while staging a file below it 1,000 times: no
// staged copy may ever hold the secret. Failed stages are expected; leaks are not.
func TestStageSwapRace(t *testing.T) {
	base := t.TempDir()
	allowed := filepath.Join(base, "allowed")
	secret := filepath.Join(base, "secret")
	writeFile(t, filepath.Join(allowed, "d", "x"), "public")
	writeFile(t, filepath.Join(secret, "x"), "SECRET")
	require.NoError(t, os.Symlink(secret, filepath.Join(allowed, "l")))

	s := openSession(t, newManager(t, nil), "race")
	d, l := filepath.Join(allowed, "d"), filepath.Join(allowed, "l")

	swaptest.Race(t, d, l, 1000, func() (ok, leaked bool) {
		if _, err := s.Stage([]Input{{Name: "x", Source: filepath.Join(d, "x")}}); err != nil {
			return false, false
		}
		return true, strings.Contains(readFile(t, filepath.Join(s.Dir(), "inputs", "x")), "SECRET")
	})
}

// TestStagePrivate: nothing under the workspace's sessions/ (other sessions), the
// artifacts directory or Options.PrivateDirs is stageable, also when named through
// a symlinked path, whatever policy allowed it.
func TestStagePrivate(t *testing.T) {
	base := t.TempDir()
	state := filepath.Join(base, "state")
	writeFile(t, filepath.Join(state, "token"), "T")
	arts := filepath.Join(base, "arts")
	m := newManager(t, func(o *Options) { o.ArtifactsDir = arts; o.PrivateDirs = []string{state} })
	other := openSession(t, m, "other")
	writeFile(t, filepath.Join(other.Dir(), "inputs", "secret"), "S")
	writeFile(t, filepath.Join(arts, "other", "result.csv"), "R")
	late := filepath.Join(base, "late")
	writeFile(t, filepath.Join(late, "sock.cfg"), "C")
	m.Protect(late)
	writeFile(t, filepath.Join(base, "ok"), "fine")
	link := filepath.Join(base, "rootlink")
	require.NoError(t, os.Symlink(m.Root(), link))

	s := openSession(t, m, "me")
	for _, src := range []string{
		filepath.Join(other.Dir(), "inputs", "secret"),
		filepath.Join(arts, "other", "result.csv"),
		filepath.Join(state, "token"),
		filepath.Join(late, "sock.cfg"),
		filepath.Join(m.Root(), "sessions"),
	} {
		_, err := s.Stage([]Input{{Name: "x", Source: src}})
		require.ErrorIs(t, err, ErrPrivate, src)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(link, "sessions", "other", "inputs", "secret"))
	require.NoError(t, err)
	_, err = s.Stage([]Input{{Name: "x", Source: real}})
	require.ErrorIs(t, err, ErrPrivate)

	_, err = s.Stage([]Input{{Name: "x", Source: filepath.Join(base, "ok")}})
	require.NoError(t, err)
	// Beside sessions/ the workspace root is the user's (the demo keeps its
	// project there).
	writeFile(t, filepath.Join(m.Root(), "project", "data.csv"), "d")
	_, err = s.Stage([]Input{{Name: "y", Source: filepath.Join(m.Root(), "project", "data.csv")}})
	require.NoError(t, err)
	require.Equal(t, "fine", readFile(t, filepath.Join(s.Dir(), "inputs", "x")))
}

// TestAddDataSwapRace is TestStageSwapRace for a data directory below the
// swapped one.
func TestAddDataSwapRace(t *testing.T) {
	base := t.TempDir()
	d, l := filepath.Join(base, "d"), filepath.Join(base, "l")
	writeFile(t, filepath.Join(d, "ds", "x"), "public")
	writeFile(t, filepath.Join(base, "secret", "ds", "x"), "SECRET")
	require.NoError(t, os.Symlink(filepath.Join(base, "secret"), l))
	s := openSession(t, newManager(t, nil), "race")

	swaptest.Race(t, d, l, 1000, func() (ok, leaked bool) {
		if err := s.AddData("ds", filepath.Join(d, "ds"), 0); err != nil {
			return false, false
		}
		return true, readFile(t, filepath.Join(s.Dir(), "data", "ds", "x")) == "SECRET"
	})
}

// TestStageRefusesLinkInPath: a source whose path leads through a symlink (it
// was canonical when it was decided, and changed since) is refused by name.
func TestStageRefusesLinkInPath(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	writeFile(t, filepath.Join(base, "d", "x"), "public")
	require.NoError(t, os.Symlink(filepath.Join(base, "d"), filepath.Join(base, "l")))
	s := openSession(t, newManager(t, nil), "s")
	_, err := s.Stage([]Input{{Name: "x", Source: filepath.Join(base, "l", "x"), Requested: "l/x"}})
	require.ErrorIs(t, err, ErrLinkInPath)
	require.EqualError(t, err, `stage input "l/x": path leads through a symbolic link (it changed since it was resolved)`)
}
