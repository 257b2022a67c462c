package keep

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Gate is a backend's opening gate. Work (an Open) enters it and leaves it; Shut
// (Close, Detach) closes it: no work enters after that, the work inside has its
// context cancelled, and Shut returns once that work has left, so that what the
// backend then lists is all it will have. The zero value is open. It is safe for
// concurrent use.
type Gate struct {
	mu     sync.Mutex
	closed bool
	// life is cancelled by Shut. It is a lifetime signal, not a request context:
	// storing it is the simplest way to tie each piece of work's context to the
	// backend's end with context.AfterFunc.
	life   context.Context
	cancel context.CancelFunc
	inside sync.WaitGroup
}

// lifeLocked returns the gate's lifetime, made at first use; g.mu is held.
func (g *Gate) lifeLocked() context.Context {
	if g.life == nil {
		g.life, g.cancel = context.WithCancel(context.Background())
	}
	return g.life
}

// Enter lets one piece of work in. It returns ctx, which Shut cancels too, and
// leave, which the work calls once it is done (it releases the context). It
// reports false, and lets nothing in, once the gate is shut.
func (g *Gate) Enter(ctx context.Context) (_ context.Context, leave func(), ok bool) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ctx, func() {}, false
	}
	life := g.lifeLocked()
	g.inside.Add(1)
	g.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(life, cancel)
	return ctx, func() {
		stop()
		cancel()
		g.inside.Done()
	}, true
}

// Shut closes the gate, cancels the work inside and waits until it has left. It
// reports false when the gate was shut already: a second Close or Detach then
// does nothing.
func (g *Gate) Shut() bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	g.closed = true
	g.lifeLocked()
	g.mu.Unlock()
	g.cancel()
	g.inside.Wait()
	return true
}

// Closed reports whether Shut has begun.
func (g *Gate) Closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// Life returns the gate's lifetime, which Shut cancels: the backend's background
// work (a watch, a state writer) ends with it, and an Open that failed tells by
// it whether it failed because the backend is closing.
func (g *Gate) Life() context.Context {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lifeLocked()
}

// Open runs one of a backend's Opens through g: it returns closed, the backend's
// sentinel, when g is shut, and otherwise what open returned. open's context ends
// when g shuts too; an error is wrapped with the session's id, and joined with
// closed when g shut while open ran (the Open was aborted by Close or Detach).
func Open[P any](ctx context.Context, g *Gate, closed error, session string, open func(context.Context) (P, error)) (P, error) {
	var zero P
	ctx, leave, ok := g.Enter(ctx)
	defer leave()
	if !ok {
		return zero, closed
	}
	p, err := open(ctx)
	if err != nil {
		if g.Life().Err() != nil {
			err = errors.Join(closed, err)
		}
		return zero, fmt.Errorf("open session %q: %w", session, err)
	}
	return p, nil
}
