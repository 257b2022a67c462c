package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKeepMounted: a disk KeepMounted names survives Close and the next New that
// names it (Options.KeepMounted), with its files, and is not counted as a closed
// session; a Close that does not name it again unmounts it.
func TestKeepMounted(t *testing.T) {
	root := filepath.Join(t.TempDir(), "kb")
	opts := Options{Root: root, DiskQuota: 64 << 20}
	m, err := New(opts)
	require.NoError(t, err)
	if !requireDisks(t, m) {
		m.Close()
		return
	}
	s, err := m.Open("k1")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(s.Dir(), "outputs", "f"), []byte("kept"), 0o644))
	m.KeepMounted("k1")
	m.Close() // a server stopping with its sessions kept: the session stays open
	require.True(t, isMounted(t, filepath.Join(root, "sessions", "k1")), "kept mounted across Close")

	opts.KeepMounted = []string{"k1"}
	m, err = New(opts)
	require.NoError(t, err)
	require.True(t, isMounted(t, filepath.Join(root, "sessions", "k1")), "kept mounted across New")
	assert.NotContains(t, m.KeptSessions(), "k1", "a live session is not a closed one")
	s2, err := m.Open("k1") // the adopted session: the same mount, not a second one
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(s2.Dir(), "outputs", "f"))
	require.NoError(t, err)
	assert.Equal(t, "kept", string(b))
	require.NoError(t, s2.Close())
	require.NoError(t, s.Close())
	m.Close()
	assert.False(t, isMounted(t, filepath.Join(root, "sessions", "k1")), "unmounted by a Close that does not keep it")
}

// isMounted reports whether dir is a mount point, from the mount table.
func isMounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == dir {
			return true
		}
	}
	return false
}
