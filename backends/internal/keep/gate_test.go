package keep

import (
	"context"
	"errors"
	"strings"
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

var errClosed = errors.New("backend is closed")

// TestOpen: an Open through an open gate returns what open returned, an error
// wrapped with the session; one that Shut aborts is cancelled, waited for, and
// its error joins the backend's sentinel; after Shut, the sentinel alone.
func TestOpen(t *testing.T) {
	t.Parallel()
	var g Gate
	p, err := Open(context.Background(), &g, errClosed, "s1", func(context.Context) (int, error) { return 7, nil })
	if p != 7 || err != nil {
		t.Fatalf("Open: %d, %v", p, err)
	}
	bad := errors.New("no image")
	_, err = Open(context.Background(), &g, errClosed, "s1", func(context.Context) (int, error) { return 0, bad })
	if !errors.Is(err, bad) || errors.Is(err, errClosed) || !strings.Contains(err.Error(), `open session "s1"`) {
		t.Fatalf("failed Open: %v", err)
	}
	in := make(chan struct{})
	done := make(chan error, 1)
	var returned atomic.Bool
	go func() {
		_, err := Open(context.Background(), &g, errClosed, "s2", func(ctx context.Context) (int, error) {
			close(in)
			<-ctx.Done() // Shut cancels it
			time.Sleep(20 * time.Millisecond)
			returned.Store(true)
			return 0, ctx.Err()
		})
		done <- err
	}()
	<-in
	g.Shut()
	if !returned.Load() {
		t.Fatal("Shut returned before the Open in flight")
	}
	err = <-done
	if !errors.Is(err, errClosed) || !errors.Is(err, context.Canceled) {
		t.Fatalf("aborted Open: %v", err)
	}
	called := false
	_, err = Open(context.Background(), &g, errClosed, "s3", func(context.Context) (int, error) { called = true; return 1, nil })
	if err != errClosed || called {
		t.Fatalf("Open after Shut: %v, called %t", err, called)
	}
}
