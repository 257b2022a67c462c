package api

import "context"

type queuedKey struct{}

// WithQueued returns ctx carrying fn, which a runner calls once the call it runs
// under ctx is queued on its session (behind the calls sent before it, ahead of
// any sent after), or not at all when the call fails before that. The calls
// registry waits for it so that a detached call is ordered before whatever its
// client sends next.
func WithQueued(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, queuedKey{}, fn)
}

// Queued calls the function WithQueued put in ctx, if any.
func Queued(ctx context.Context) {
	if fn, ok := ctx.Value(queuedKey{}).(func()); ok {
		fn()
	}
}
