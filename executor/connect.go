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
// fails the check is dropped and made again until ctx ends.
func (k *kernel) connect(ctx context.Context, e *Executor) error {
	if k.conn != nil {
		_ = k.conn.Close()
		k.conn = nil
	}
	ctx, stop := k.watchGone(ctx)
	defer stop()
	var lastErr error
	var failing time.Time // since when every handshake has failed with a server error
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			if cause := context.Cause(ctx); errors.Is(cause, jupyter.ErrNotFound) {
				return fmt.Errorf("connect to kernel %s: %w", k.id, cause)
			}
			if lastErr == nil {
				return fmt.Errorf("connect to kernel %s: %w", k.id, ctx.Err())
			}
			return fmt.Errorf("connect to kernel %s: %w (last error: %w)", k.id, ctx.Err(), lastErr)
		}
		conn, err := k.client.Connect(ctx, k.id, &jupyter.ConnOptions{
			Logger:          e.log,
			MaxMessageBytes: max(e.opts.MaxStreamBytes, e.opts.MaxRichBytes) + 1<<20,
			SalvageBytes:    e.opts.MaxStreamBytes,
		})
		if err == nil {
			var lang string
			if lang, err = probe(ctx, conn); err == nil {
				k.conn, k.language = conn, lang
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

// probe checks a new connection end to end: kernel_info on shell, then a silent empty
// execution whose reply and idle status (iopub) must both arrive. It returns the
// kernel's language_info.name ("" when the reply has none).
func probe(ctx context.Context, conn *jupyter.Conn) (string, error) {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := conn.KernelInfo(pctx)
	if err != nil {
		return "", fmt.Errorf("kernel_info: %w", err)
	}
	var c struct {
		LanguageInfo struct {
			Name string `json:"name"`
		} `json:"language_info"`
	}
	_ = info.DecodeContent(&c) // a reply without language_info names none
	ex, err := conn.Execute(pctx, jupyter.ExecuteRequest{Code: "", Silent: true})
	if err != nil {
		return "", err
	}
	defer ex.Close()
	for {
		if _, err := ex.Next(pctx); err != nil {
			if err == io.EOF {
				return c.LanguageInfo.Name, nil
			}
			return "", fmt.Errorf("probe execution: %w", err)
		}
	}
}
