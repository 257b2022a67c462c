package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests in this file play the kernel: a goroutine keeps swapping links into
// the session directory while Stage or Collect runs, and the test checks that
// nothing outside the session was ever written or read.

// racer runs swap in a loop until the test ends, and waits for it.
func racer(t *testing.T, swap func()) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				swap()
			}
		}
	})
}

func TestStageUnderAttack(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	writeFile(t, victim, "precious")
	inputs := filepath.Join(s.Dir(), "inputs")
	racer(t, func() {
		// Alternate between replacing inputs/ with a link out and planting a
		// link at the destination name.
		_ = os.RemoveAll(inputs)
		_ = os.Symlink(outside, inputs)
		_ = os.Remove(inputs)
		_ = os.Mkdir(inputs, 0o755)
		_ = os.Symlink(victim, filepath.Join(inputs, "data.csv"))
	})

	src := filepath.Join(t.TempDir(), "data.csv")
	writeFile(t, src, "attacker must not see this outside")
	ok := 0
	for range 300 {
		if _, err := s.Stage([]Input{{Name: "data.csv", Source: src}}); err == nil {
			ok++
		}
	}
	t.Logf("%d of 300 stagings succeeded while racing", ok)
	assert.Equal(t, []string{"victim"}, dirNames(t, outside), "nothing written outside")
	assert.Equal(t, "precious", readFile(t, victim))
}

func TestCollectUnderAttack(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	secretDir := t.TempDir()
	writeFile(t, filepath.Join(secretDir, "secret"), "SECRET")
	writeFile(t, filepath.Join(s.Dir(), "inputs", "secret"), "SECRET")
	out := filepath.Join(s.Dir(), "outputs")
	f := filepath.Join(out, "f.txt")
	sub := filepath.Join(out, "sub")
	rel, err := filepath.Rel(out, filepath.Join(secretDir, "secret"))
	require.NoError(t, err)
	targets := []string{filepath.Join(secretDir, "secret"), rel, "../inputs/secret"}
	i := 0
	racer(t, func() {
		i++
		target := targets[i%len(targets)]
		_ = os.Remove(f)
		_ = os.WriteFile(f, []byte(strings.Repeat("ok", i%5+1)), 0o644)
		_ = os.Remove(f)
		_ = os.Symlink(target, f)
		_ = os.RemoveAll(sub)
		_ = os.Symlink(filepath.Dir(target), sub)
		_ = os.Remove(sub)
		_ = os.Mkdir(sub, 0o755)
		_ = os.WriteFile(filepath.Join(sub, "secret"), []byte("ok"), 0o644)
	})

	for range 300 {
		_, _ = s.Collect()
	}
	err = filepath.WalkDir(m.ArtifactsDir(), func(p string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		assert.Zero(t, d.Type()&os.ModeSymlink, "no link in artifacts: %s", p)
		if d.Type().IsRegular() {
			assert.NotContains(t, readFile(t, p), "SECRET", p)
		}
		return nil
	})
	require.NoError(t, err)
}
