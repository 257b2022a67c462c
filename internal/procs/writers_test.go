//go:build linux

package procs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// held opens a new file at path with flag and returns its id and the owner's
// uid; the file stays open until the test ends.
func held(tb testing.TB, path string, flag int) (FileID, uint32) {
	tb.Helper()
	f, err := os.OpenFile(path, flag|os.O_CREATE, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	fi, err := f.Stat()
	if err != nil {
		tb.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return FileID{uint64(st.Dev), uint64(st.Ino)}, st.Uid
}

// TestOpenForWriting: this process's own descriptors are found when open for
// writing, and only then; a file whose name is not asked about is not looked at.
func TestOpenForWriting(t *testing.T) {
	dir := t.TempDir()
	w, uid := held(t, filepath.Join(dir, "w.bin"), os.O_WRONLY)
	rw, _ := held(t, filepath.Join(dir, "rw.bin"), os.O_RDWR)
	ro, _ := held(t, filepath.Join(dir, "ro.bin"), os.O_RDONLY)
	files := map[FileID]bool{w: true, rw: true, ro: true}
	names := map[string]bool{"w.bin": true, "rw.bin": true, "ro.bin": true}
	owners := map[uint32]bool{uid: true}
	got := OpenForWriting(files, names, owners)
	if !got[w] || !got[rw] || got[ro] || len(got) != 2 {
		t.Fatalf("writers %v: want the O_WRONLY and the O_RDWR file only (%v %v)", got, w, rw)
	}
	if got := OpenForWriting(files, map[string]bool{"other": true}, owners); len(got) != 0 {
		t.Fatalf("writers %v of files whose names were not asked about", got)
	}
	if got := OpenForWriting(files, names, map[uint32]bool{uid + 1: true}); len(got) != 0 {
		t.Fatalf("writers %v among processes of another owner", got)
	}
}

// BenchmarkWriterScan is the scan for writers a Collect that copied something
// pays: one readlink per open descriptor of the processes running as the file's
// owner (as root in CI: most of the host's).
func BenchmarkWriterScan(b *testing.B) {
	id, uid := held(b, filepath.Join(b.TempDir(), "held.bin"), os.O_WRONLY)
	files := map[FileID]bool{id: true}
	names := map[string]bool{"held.bin": true}
	owners := map[uint32]bool{uid: true}
	for b.Loop() {
		if w := OpenForWriting(files, names, owners); !w[id] {
			b.Fatal("own descriptor not found")
		}
	}
}
