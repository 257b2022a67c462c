package executor

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// restart restarts the kernel under the same id (its state is lost) and reconnects.
func (k *kernel) restart(ctx context.Context, e *Executor) error {
	k.dropConn()
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
		if err := k.stopKernel(ctx); err != nil {
			errs = append(errs, err)
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

// stopKernel asks the kernel's server to shut it down and, when that fails, checks
// that it is gone: a DELETE refused while the server still knows the kernel is sent
// again, every stopRetry, until it succeeds or the kernel is unknown to the server
// (404). A DELETE that comes while the server restarts a kernel that just died
// fails (500) for as long as the restart takes, about a second: two tries 27 ms
// apart both failed and left the kernel running (TestServeSoak). A server that no
// longer answers has taken the kernel with it; a bound that ran out is not
// reported (the placement's release follows, and for a server of its own removes it).
func (k *kernel) stopKernel(ctx context.Context) error {
	var err error
	for tries := 1; ; tries++ {
		err = k.client.Shutdown(ctx, k.id)
		if err == nil || ctx.Err() != nil {
			return nil
		}
		if _, gerr := k.client.Kernel(ctx, k.id); gerr != nil {
			return nil // 404: gone; anything else: the server itself is gone
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kernel %s is still on its server after %d shutdown requests: %w", k.id, tries, err)
		case <-time.After(stopRetry):
		}
	}
}

// stopRetry is how long stopKernel waits before it sends a refused DELETE again.
const stopRetry = 250 * time.Millisecond
