package executor

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A fork's copy of a session's files is bounded by apparent size (a sparse file
// that takes no space counts in full), leaves out links, FIFOs and data/, and never
// blocks on a FIFO.
func TestCopyTreeBounds(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "outputs", "deep"), 0o755))
	must(os.WriteFile(filepath.Join(src, "outputs", "deep", "a.txt"), []byte("hello"), 0o644))
	must(os.Symlink("/etc/passwd", filepath.Join(src, "link")))
	must(syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644))
	must(os.MkdirAll(filepath.Join(src, "data"), 0o755))
	must(os.WriteFile(filepath.Join(src, "data", "d.csv"), []byte("x"), 0o644))

	done := make(chan error, 1)
	go func() { done <- copyTree(src, dst, 1<<20) }()
	select {
	case err := <-done:
		must(err)
	case <-time.After(10 * time.Second):
		t.Fatal("copyTree blocked (on the FIFO?)")
	}
	if b, err := os.ReadFile(filepath.Join(dst, "outputs", "deep", "a.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("a.txt: %q, %v", b, err)
	}
	for _, name := range []string{"link", "fifo", "data"} {
		if _, err := os.Lstat(filepath.Join(dst, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was copied: %v", name, err)
		}
	}

	// A sparse file of 1 GiB takes no space but is over a 1 MiB limit.
	f, err := os.Create(filepath.Join(src, "sparse"))
	must(err)
	must(f.Truncate(1 << 30))
	must(f.Close())
	err = copyTree(src, t.TempDir(), 1<<20)
	if !errors.Is(err, ErrSnapshotTooLarge) {
		t.Fatalf("a sparse 1 GiB file under a 1 MiB limit: %v, want ErrSnapshotTooLarge", err)
	}
	t.Logf("refused: %v", err)
}
