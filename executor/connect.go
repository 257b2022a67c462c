package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kernelbox/kernelbox/jupyter"
)

// connect opens a fresh WebSocket to the kernel and checks that both its shell and
// iopub channels answer. A kernel the server has just restarted may be listening on
// new ports that a WebSocket opened too early does not reach, so a connection that
// fails the check is dropped and made again, until ctx ends or ConnectTimeout passes;
// each step of an attempt is bounded by a third of ConnectTimeout (StepTimeoutError).
// Once connected, a KernelWatcher placement is asked to watch the kernel's process.
func (k *kernel) connect(ctx context.Context, e *Executor) error {
	k.dropConn()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, e.opts.ConnectTimeout)
	defer cancel()
	ctx, stop := k.watchGone(ctx)
	defer stop()
	step := e.connectStep()
	var lastErr error
	var failing time.Time // since when every handshake has failed with a server error
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			if cause := context.Cause(ctx); errors.Is(cause, jupyter.ErrNotFound) {
				return fmt.Errorf("connect to kernel %s: %w", k.id, cause)
			}
			if parent.Err() == nil && lastErr != nil {
				return fmt.Errorf("connect to kernel %s: no connection within %s (ConnectTimeout): %w", k.id, e.opts.ConnectTimeout, lastErr)
			}
			if lastErr == nil {
				return fmt.Errorf("connect to kernel %s: %w", k.id, ctx.Err())
			}
			return fmt.Errorf("connect to kernel %s: %w (last error: %w)", k.id, ctx.Err(), lastErr)
		}
		conn, err := dialStep(ctx, step, func(dctx context.Context) (*jupyter.Conn, error) {
			return k.client.Connect(dctx, k.id, &jupyter.ConnOptions{
				Logger:          e.log,
				MaxMessageBytes: max(e.opts.MaxStreamBytes, e.opts.MaxRichBytes) + 1<<20,
				SalvageBytes:    e.opts.MaxStreamBytes,
			})
		})
		if err == nil {
			var lang string
			if lang, err = probe(ctx, conn, min(step, probeBound)); err == nil {
				k.conn, k.language = conn, lang
				k.watchProcess(ctx, e)
				return nil
			}
			_ = conn.Close()
		}
		if errors.Is(err, jupyter.ErrNotFound) {
			return err // also the watch's verdict, when it cut a handshake short
		}
		// A server that keeps failing the handshake (5xx) has a kernel it cannot
		// serve (one whose directory went away, say): waiting out ctx would hold
		// the call for the whole start timeout.
		var he *jupyter.HTTPError
		if errors.As(err, &he) && he.StatusCode >= 500 {
			if failing.IsZero() {
				failing = time.Now()
			} else if time.Since(failing) > serverErrorBound {
				return fmt.Errorf("connect to kernel %s: the server failed every handshake for %s: %w", k.id, serverErrorBound, err)
			}
		} else {
			failing = time.Time{}
		}
		lastErr = err
		e.log.Debug("kernel connection not ready; retrying", "kernel_id", k.id, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second)):
		}
	}
}

// serverErrorBound is how long connect retries a server that fails every handshake
// with a 5xx before it gives up.
const serverErrorBound = 10 * time.Second

// watchGone returns a context that ends, with a cause wrapping jupyter.ErrNotFound,
// once the server no longer knows the kernel, or has not answered at all for
// serverErrorBound (it went away: a connection would be retried until ctx ends). A kernel that dies as it starts is
// dropped by the server within seconds, while a WebSocket opened to it waits for a
// kernel_info reply that never comes; the watch ends that wait. A connection made
// within the first poll interval costs no request. stop ends the watch and waits for
// it.
func (k *kernel) watchGone(ctx context.Context) (_ context.Context, stop func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		var unreachable time.Time // since when the server has not answered at all
		for {
			select {
			case <-wctx.Done():
				return
			case <-k.lost: // nil, never ready, unless a LossReporter's
				cancel(fmt.Errorf("%w: its placement reported its server gone", jupyter.ErrNotFound))
				return
			case <-t.C:
			}
			_, err := k.client.Kernel(wctx, k.id)
			if errors.Is(err, jupyter.ErrNotFound) {
				cancel(err) // "GET /api/kernels/<id>: 404: …", wrapping ErrNotFound
				return
			}
			var he *jupyter.HTTPError
			switch {
			case err == nil || errors.As(err, &he) || wctx.Err() != nil:
				unreachable = time.Time{}
			case unreachable.IsZero():
				unreachable = time.Now()
			case time.Since(unreachable) > serverErrorBound:
				cancel(fmt.Errorf("%w: its server has not answered for %s: %w", jupyter.ErrNotFound, serverErrorBound, err))
				return
			}
		}
	}()
	return wctx, func() {
		cancel(nil)
		<-done
	}
}

// dialStep runs the WebSocket dial under the step bound, naming the step when the
// bound, not ctx, ended it.
func dialStep(ctx context.Context, bound time.Duration, dial func(context.Context) (*jupyter.Conn, error)) (*jupyter.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	conn, err := dial(dctx)
	if err != nil && dctx.Err() != nil && ctx.Err() == nil {
		return nil, &StepTimeoutError{Step: "websocket dial", Bound: bound}
	}
	return conn, err
}

// connectStep is the bound of one step of a connection: a third of ConnectTimeout.
func (e *Executor) connectStep() time.Duration { return e.opts.ConnectTimeout / 3 }

// probeBound caps the probe's steps: a connection opened to a kernel the server was
// restarting may never be answered (the kernel listens on new ports), and is made
// again after this.
const probeBound = 10 * time.Second

// probe checks a new connection end to end: kernel_info on shell, then a silent empty
// execution whose reply and idle status (iopub) must both arrive, each within bound.
// It returns the kernel's language_info.name ("" when the reply has none).
func probe(ctx context.Context, conn *jupyter.Conn, bound time.Duration) (string, error) {
	kctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	info, err := conn.KernelInfo(kctx)
	if err != nil {
		if kctx.Err() != nil && ctx.Err() == nil {
			return "", &StepTimeoutError{Step: "kernel_info", Bound: bound}
		}
		return "", fmt.Errorf("kernel_info: %w", err)
	}
	var c struct {
		LanguageInfo struct {
			Name string `json:"name"`
		} `json:"language_info"`
	}
	_ = info.DecodeContent(&c) // a reply without language_info names none
	ectx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	ex, err := conn.Execute(ectx, jupyter.ExecuteRequest{Code: "", Silent: true})
	if err == nil {
		defer ex.Close()
		for err == nil {
			_, err = ex.Next(ectx)
		}
		if err == io.EOF {
			return c.LanguageInfo.Name, nil
		}
	}
	if ectx.Err() != nil && ctx.Err() == nil {
		return "", &StepTimeoutError{Step: "probe execution", Bound: bound}
	}
	return "", fmt.Errorf("probe execution: %w", err)
}

// watchProcess asks a KernelWatcher placement for a check of the kernel's process,
// used before every call (alive). Without one, or when it cannot find the process,
// the kernel has no such check.
func (k *kernel) watchProcess(ctx context.Context, e *Executor) {
	k.exited = nil
	w, ok := k.placement.(KernelWatcher)
	if !ok {
		return
	}
	exited, err := w.WatchKernel(ctx, k.id)
	if err != nil {
		e.log.Debug("cannot watch the kernel's process; calls go out without that check", "kernel_id", k.id, "err", err)
		return
	}
	k.exited = exited
}

// dropConn closes the kernel's connection, if any, and forgets it.
func (k *kernel) dropConn() {
	if k.conn != nil {
		_ = k.conn.Close()
		k.conn = nil
	}
}
