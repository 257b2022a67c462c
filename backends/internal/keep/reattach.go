package keep

import (
	"context"
	"sync"

	"github.com/kernelbox/kernelbox/executor"
)

// DefaultAtOnce is Reattach's bound when a backend gives none: a state file
// may list thousands of records (4 MiB), and each take-back holds a request to
// the engine or a gateway open.
const DefaultAtOnce = 16

// Reattach is the fan-out of a backend's Reattach: it takes back each of the
// kept records with one, each in a goroutine of its own and at most atOnce at a
// time (0 or less: DefaultAtOnce), and returns what each came to, in the order
// they finished. A record one cannot take back comes back with Lost saying why;
// one is never told to stop early, so every record has its outcome.
func Reattach[K any](ctx context.Context, kept []K, atOnce int, one func(context.Context, K) executor.Reattached) []executor.Reattached {
	out := make([]executor.Reattached, 0, len(kept))
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	if atOnce <= 0 {
		atOnce = DefaultAtOnce
	}
	slots := make(chan struct{}, atOnce)
	for _, k := range kept {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			r := one(ctx, k)
			mu.Lock()
			out = append(out, r)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}
