package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// newManager returns a Manager on a fresh temporary root; edit adjusts its options.
func newManager(tb testing.TB, edit func(*Options)) *Manager {
	tb.Helper()
	opts := Options{Root: filepath.Join(tb.TempDir(), "kb")}
	if edit != nil {
		edit(&opts)
	}
	m, err := New(opts)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		// Data copies are read-only directories, which the TempDir cleanup cannot
		// empty when the tests run as a non-root user; Remove can.
		entries, _ := os.ReadDir(filepath.Join(m.Root(), "sessions"))
		for _, e := range entries {
			if err := m.Remove(e.Name()); err != nil {
				tb.Errorf("cleanup: %v", err)
			}
		}
		m.Close()
	})
	return m
}

// openSession opens session id on m and closes it at the end of the test.
func openSession(tb testing.TB, m *Manager, id string) *Session {
	tb.Helper()
	s, err := m.Open(id)
	require.NoError(tb, err)
	tb.Cleanup(func() { s.Close() })
	return s
}

// writeFile writes content to path, creating parent directories.
func writeFile(tb testing.TB, path, content string) {
	tb.Helper()
	require.NoError(tb, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(tb, os.WriteFile(path, []byte(content), 0o644))
}

// readFile returns the content of path.
func readFile(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	require.NoError(tb, err)
	return string(b)
}

// dirNames lists the names in dir, sorted.
func dirNames(tb testing.TB, dir string) []string {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(tb, err)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// artifactNames returns the Names of arts in order.
func artifactNames(arts []Artifact) []string {
	names := make([]string, 0, len(arts))
	for _, a := range arts {
		names = append(names, a.Name)
	}
	return names
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
