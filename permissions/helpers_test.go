package permissions

import (
	"os"
	"path/filepath"
	"testing"
)

// tempDir returns a new temporary directory with symlinks resolved, so that tests
// can compare canonical paths on systems where the temp dir is reached by a link.
func tempDir(tb testing.TB) string {
	tb.Helper()
	d, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// writeFile creates path, and its parent directories, with some content.
func writeFile(tb testing.TB, path string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("data"), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// symlink creates the link newname pointing at oldname, and newname's parents.
func symlink(tb testing.TB, oldname, newname string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(newname), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.Symlink(oldname, newname); err != nil {
		tb.Fatal(err)
	}
}
