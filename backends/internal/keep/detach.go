package keep

import (
	"context"
	"sync"
)

// Keeper is what differs per backend in its Detach: which placements the next
// start can take back, how one it cannot is ended, and how one it can is let go
// of without ending it. The backends implement it on a type of their own, so
// that these methods are not part of their API.
type Keeper[P any] interface {
	// Keep reports whether the next start can take p back: the state file lists
	// it.
	Keep(p P) bool
	// Drop ends p, which the next start cannot take back.
	Drop(ctx context.Context, p P) error
	// Release lets go of p without ending it: the next start takes it back.
	Release(p P)
}

// Detach is the middle of a backend's Detach, once its gate is shut (see Gate):
// it ends each placement of all that k does not keep, each in a goroutine of its
// own, then writes the state file a last time with final (through w: no later
// write replaces it), then releases the placements kept. It returns those, and
// one error for each placement dropped (nil when it ended well). Dropping comes
// before the last write so that the file does not list what is being ended.
func Detach[P any](ctx context.Context, all []P, k Keeper[P], w *Writes, final func()) (kept []P, errs []error) {
	var drop []P
	for _, p := range all {
		if k.Keep(p) {
			kept = append(kept, p)
		} else {
			drop = append(drop, p)
		}
	}
	errs = make([]error, len(drop))
	var wg sync.WaitGroup
	for i, p := range drop {
		wg.Go(func() { errs[i] = k.Drop(ctx, p) })
	}
	wg.Wait()
	w.Final(final)
	for _, p := range kept {
		k.Release(p)
	}
	return kept, errs
}
