//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Collect skips walking outputs/ when inotify saw no change, and still reports every
// change made through the file system, at any depth.
func TestCollectWatch(t *testing.T) {
	m, err := New(Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.Open("w")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := filepath.Join(s.Dir(), "outputs")
	collect := func() []string {
		t.Helper()
		arts, err := s.Collect()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, a := range arts {
			names = append(names, a.Name)
		}
		return names
	}
	write := func(rel, data string) {
		t.Helper()
		p := filepath.Join(out, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := collect(); len(got) != 0 {
		t.Fatalf("empty outputs: %v", got)
	}
	if !s.watched {
		t.Fatal("outputs/ is not watched after a walk")
	}
	if !s.unchanged() {
		t.Fatal("no change, yet Collect would walk")
	}
	steps := []struct {
		name  string
		do    func()
		wants string
	}{
		{"new file", func() { write("a.txt", "1") }, "a.txt"},
		{"new nested dir", func() { write("d1/d2/b.txt", "2") }, "d1/d2/b.txt"},
		{"file in a watched nested dir", func() { write("d1/d2/c.txt", "3") }, "d1/d2/c.txt"},
		{"rewrite with other content", func() { write("d1/d2/b.txt", "22") }, "d1/d2/b.txt"},
		{"moved in", func() {
			tmp := filepath.Join(s.Dir(), "tmp.txt")
			_ = os.WriteFile(tmp, []byte("4"), 0o644)
			_ = os.Rename(tmp, filepath.Join(out, "d1", "moved.txt"))
		}, "d1/moved.txt"},
	}
	for _, st := range steps {
		// Let any racy-window re-check of the previous step pass, so that what is
		// tested here is the event path.
		time.Sleep(1100 * time.Millisecond)
		collect()
		st.do()
		if got := collect(); len(got) != 1 || got[0] != st.wants {
			t.Fatalf("%s: got %v, want [%s]", st.name, got, st.wants)
		}
	}
}

// inotify misses writes through a shared mapping: a full walk happens at least
// every fullWalkEvery regardless of events.
func TestCollectWatchFullWalk(t *testing.T) {
	m, err := New(Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.Open("w")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Collect(); err != nil {
		t.Fatal(err)
	}
	if !s.unchanged() {
		t.Fatal("no change, yet Collect would walk")
	}
	s.lastWalk = time.Now().Add(-fullWalkEvery)
	if s.unchanged() {
		t.Fatal("no full walk after fullWalkEvery")
	}
}
