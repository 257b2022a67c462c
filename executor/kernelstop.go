package executor

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// restart restarts the kernel under the same id (its state is lost) and reconnects.
func (k *kernel) restart(ctx context.Context, e *Executor) error {
	if k.conn != nil {
		_ = k.conn.Close()
		k.conn = nil
	}
	if _, err := k.client.Restart(ctx, k.id); err != nil {
		return err
	}
	k.fresh, k.count = true, 0
	if err := k.connect(ctx, e); err != nil {
		return err
	}
	return e.prepare(ctx, k)
}

// shutdown stops the kernel and releases its placement. It takes at most bound, or
// until ctx's deadline when that comes sooner. Teardown runs under a fresh context
// derived from ctx without its cancellation (context.WithoutCancel): it must run
// when ctx is already done, and a cancellation must not cut it short, or a process
// or container would outlive its session. A ctx that is already done leaves the
// teardown the whole bound.
func (k *kernel) shutdown(ctx context.Context, bound time.Duration) error {
	if dl, ok := ctx.Deadline(); ok && ctx.Err() == nil {
		bound = min(bound, time.Until(dl))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	var errs []error
	if k.conn != nil {
		_ = k.conn.Close()
	}
	if k.client != nil && k.id != "" {
		if err := k.client.Shutdown(ctx, k.id); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			// A server that is gone has taken the kernel with it.
			if k.serverAlive(ctx) {
				errs = append(errs, err)
			}
		}
		k.client.CloseIdle()
	}
	if k.placement != nil {
		if err := k.placement.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("release placement: %w", err))
		}
	}
	return errors.Join(errs...)
}
