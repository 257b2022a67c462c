package keptfile

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestGate: writes never overlap, and none runs after Final.
func TestGate(t *testing.T) {
	var g Gate
	var mu sync.Mutex
	running, overlaps, after, final := 0, 0, 0, false
	write := func() {
		mu.Lock()
		running++
		if running > 1 {
			overlaps++
		}
		if final {
			after++
		}
		mu.Unlock()
		mu.Lock()
		running--
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { g.Save(write) })
	}
	wg.Wait()
	g.Final(func() { write(); mu.Lock(); final = true; mu.Unlock() })
	for range 10 {
		g.Save(write)
	}
	if overlaps != 0 || after != 0 {
		t.Fatalf("overlapping writes %d, writes after Final %d", overlaps, after)
	}
}

// TestSplit: what keep refuses is closed (each once) and its errors returned; what
// it accepts is returned untouched, in order.
func TestSplit(t *testing.T) {
	var mu sync.Mutex
	closed := map[int]int{}
	kept, errs := Split([]int{1, 2, 3, 4, 5}, func(n int) bool { return n%2 == 1 }, func(n int) error {
		mu.Lock()
		closed[n]++
		mu.Unlock()
		if n == 4 {
			return errors.New("four")
		}
		return nil
	})
	if !slices.Equal(kept, []int{1, 3, 5}) {
		t.Fatalf("kept %v", kept)
	}
	if len(closed) != 2 || closed[2] != 1 || closed[4] != 1 {
		t.Fatalf("closed %v", closed)
	}
	if err := errors.Join(errs...); err == nil || err.Error() != "four" {
		t.Fatalf("errors %v", errs)
	}
}

// TestWrite: the state is written as JSON, 0600; an unwritable path is logged.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	Write(log, path, map[string]int{"a": 1})
	data, err := os.ReadFile(path)
	if err != nil || string(data) != `{"a":1}` {
		t.Fatalf("read %q, %v", data, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	Write(log, filepath.Join(dir, "missing", "state.json"), 1)
	if !strings.Contains(logged.String(), "cannot adopt") {
		t.Fatalf("not logged: %q", logged.String())
	}
}

// TestLock: a second holder of the state file is refused while the first holds
// it, and takes it once the first lets go; no path takes no lock.
func TestLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "remote.json")
	f, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(path); !errors.Is(err, ErrInUse) {
		t.Fatalf("a second Lock: %v, want ErrInUse", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = Lock(path)
	if err != nil {
		t.Fatalf("Lock after the first let go: %v", err)
	}
	_ = f.Close()
	if f, err := Lock(""); f != nil || err != nil {
		t.Fatalf("Lock(\"\") = %v, %v", f, err)
	}
}
