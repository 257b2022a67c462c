package executor

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// The calls journal keeps each session's last line, and folds itself into the
// state file once it passes maxWholeLog, so it never grows past that bound.
func TestWholeJournalBoundedAndLatest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := &Executor{opts: Options{StateDir: dir}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		keep: &keeper{path: filepath.Join(dir, stateFileName), dirty: make(chan struct{}, 1)}}
	t.Cleanup(func() {
		if e.keep.whole != nil {
			e.keep.whole.Close()
		}
	})
	e.appendWhole(wholeLine{ID: "a", Whole: 1, Count: 7})
	e.appendWhole(wholeLine{ID: "a", Count: 1}) // a reset: the count begins again
	e.appendWhole(wholeLine{ID: "b", Whole: 3, Count: 3})
	got := readWhole(dir)
	if got["a"] != (wholeLine{ID: "a", Count: 1}) || got["b"].Whole != 3 {
		t.Fatalf("last lines: %+v", got)
	}
	for i := range 40_000 { // ~1.6 MB of lines
		e.appendWhole(wholeLine{ID: "c", Whole: i, Count: i})
	}
	fi, err := os.Stat(filepath.Join(dir, wholeLogName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > maxWholeLog {
		t.Fatalf("journal is %d bytes, past its bound %d", fi.Size(), maxWholeLog)
	}
	if _, err := os.Stat(e.keep.path); err != nil {
		t.Fatalf("the compaction wrote no state file: %v", err)
	}
	if got := readWhole(dir)["c"]; got.Whole != 39_999 {
		t.Fatalf("last line of c after compaction: %+v", got)
	}
}
