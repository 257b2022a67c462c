package keep

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGateShut: the zero gate is open; Shut cancels the work inside, waits until
// it has left, and refuses work after it; a second Shut reports false.
func TestGateShut(t *testing.T) {
	t.Parallel()
	var g Gate
	if g.Closed() || g.Life().Err() != nil {
		t.Fatal("the zero gate is shut")
	}
	ctx, leave, ok := g.Enter(context.Background())
	if !ok {
		t.Fatal("Enter refused on an open gate")
	}
	var left atomic.Bool
	go func() {
		<-ctx.Done() // Shut cancels it
		time.Sleep(50 * time.Millisecond)
		left.Store(true)
		leave()
	}()
	if !g.Shut() {
		t.Fatal("first Shut reported false")
	}
	if !left.Load() {
		t.Fatal("Shut returned before the work inside left")
	}
	if !g.Closed() || g.Life().Err() == nil {
		t.Fatal("shut gate reports open")
	}
	if g.Shut() {
		t.Fatal("second Shut reported true")
	}
	parent := context.Background()
	ctx, leave, ok = g.Enter(parent)
	if ok || ctx != parent {
		t.Fatalf("Enter after Shut: ok %t", ok)
	}
	leave()
}

// TestGateLeave: leave releases the work's context; the parent's end ends it
// too; the gate's life goes on.
func TestGateLeave(t *testing.T) {
	t.Parallel()
	var g Gate
	parent, cancel := context.WithCancel(context.Background())
	ctx, leave, _ := g.Enter(parent)
	cancel()
	<-ctx.Done()
	leave()
	ctx, leave, _ = g.Enter(context.Background())
	leave()
	if ctx.Err() == nil {
		t.Fatal("context still live after leave")
	}
	if g.Life().Err() != nil {
		t.Fatal("leave ended the gate's life")
	}
	if !g.Shut() {
		t.Fatal("Shut after work left reported false")
	}
}

// TestGateRace: work entering while Shut runs either is refused or has left
// before Shut returns; exactly one of several Shuts reports true.
func TestGateRace(t *testing.T) {
	t.Parallel()
	for range 20 {
		var g Gate
		var inside atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					ctx, leave, ok := g.Enter(context.Background())
					if !ok {
						return
					}
					inside.Add(1)
					select {
					case <-ctx.Done():
					case <-time.After(time.Millisecond):
					}
					inside.Add(-1)
					leave()
				}
			})
		}
		var shuts atomic.Int32
		var sg sync.WaitGroup
		for range 3 {
			sg.Go(func() {
				if g.Shut() {
					if n := inside.Load(); n != 0 {
						t.Errorf("%d pieces of work inside after Shut", n)
					}
					shuts.Add(1)
				}
			})
		}
		sg.Wait()
		wg.Wait()
		if shuts.Load() != 1 {
			t.Fatalf("%d Shuts reported true", shuts.Load())
		}
	}
}
