package keptfile

import (
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
