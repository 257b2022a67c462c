package keep

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestWrites: writes never overlap, and none runs after Final.
func TestWrites(t *testing.T) {
	var g Writes
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
