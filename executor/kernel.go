package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kernelbox/kernelbox/internal/serverflags"
	"github.com/kernelbox/kernelbox/jupyter"
)

// kernel is a started kernel with its connection, on its placement.
type kernel struct {
	placement Placement
	client    *jupyter.Client
	id        string
	conn      *jupyter.Conn
	fresh     bool // started or restarted since files were last pushed (FileSyncer)

	// count is the execution count of the kernel's last reply (0 after a start or
	// restart). Counts only grow in one interpreter, so a reply that does not go
	// past it comes from a kernel replaced behind kernelbox's back.
	count int

	// ours: the kernel runs kernelbox's launcher (local, docker), which can tell how
	// much output came from threads of earlier cells (foreignExpr); other kernels
	// are not asked (the expression would fail in each call).
	ours bool

	// lost is the placement's LossReporter channel, or nil: once it is closed the
	// kernel is abandoned, never reconnected to.
	lost <-chan struct{}
}

// startKernel places a session, starts its kernel and connects to it. A server that
// went away while it was asked to start the kernel (killed as frozen, say) is
// replaced: the placement is asked for again, once.
func (e *Executor) startKernel(ctx context.Context, spec SessionSpec) (*kernel, error) {
	k, err := e.startKernelOnce(ctx, spec)
	var gone *serverGoneError
	if errors.As(err, &gone) && ctx.Err() == nil {
		e.log.Warn("the server went away while starting a kernel; placing the session again", "session", spec.ID, "err", gone.err)
		return e.startKernelOnce(ctx, spec)
	}
	return k, err
}

// serverGoneError is a kernel start that failed below HTTP: the server's connection
// broke (no answer at all), so another placement may well work.
type serverGoneError struct{ err error }

func (e *serverGoneError) Error() string { return e.err.Error() }
func (e *serverGoneError) Unwrap() error { return e.err }

func (e *Executor) startKernelOnce(ctx context.Context, spec SessionSpec) (_ *kernel, err error) {
	p, err := e.opts.Backend.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	k := &kernel{placement: p}
	if lr, ok := p.(LossReporter); ok {
		k.lost = lr.Lost()
	}
	defer func() {
		if err != nil {
			_ = k.shutdown(context.Background(), e.opts.ShutdownTimeout)
		}
	}()
	srv := p.Server()
	k.ours = srv.KernelName == serverflags.KernelName
	k.client, err = jupyter.NewClient(srv.Endpoint, &jupyter.ClientOptions{Logger: e.log})
	if err != nil {
		return nil, err
	}
	start := jupyter.StartOptions{Name: srv.KernelName, Path: srv.KernelPath, Env: srv.KernelEnv}
	for attempt := 1; ; attempt++ {
		kr, err := k.client.StartKernel(ctx, start)
		if err != nil {
			var he *jupyter.HTTPError
			if attempt == 1 && !errors.As(err, &he) && ctx.Err() == nil {
				return nil, &serverGoneError{err}
			}
			return nil, err
		}
		k.id, k.fresh = kr.ID, true
		e.opts.Observer.KernelStarted()
		err = k.connect(ctx, e)
		if err == nil {
			return k, nil
		}
		if !errors.Is(err, jupyter.ErrNotFound) {
			return nil, err
		}
		// The server reported the kernel started, then dropped it before the first
		// connection: its restarter gave up on a kernel that kept dying as it
		// started. Nothing ran in it yet, so another kernel loses nothing.
		why := k.serverLog(ctx)
		if attempt == startAttempts {
			return nil, fmt.Errorf("%w: the server dropped %d kernels in a row right after starting them%s", err, attempt, why)
		}
		e.log.Warn("kernel vanished right after it started; starting another", "kernel_id", k.id, "attempt", attempt, "server_log", why)
		_ = k.client.Shutdown(ctx, k.id)
	}
}

// startAttempts is how many kernels startKernel starts before it gives up on a
// server that drops each one right after starting it.
const startAttempts = 3

// serverLog returns what the placement's server logged about the kernel, as the tail
// of an error message ("" when it cannot tell).
func (k *kernel) serverLog(ctx context.Context) string {
	if l, ok := k.placement.(KernelLogger); ok {
		if s := l.KernelLog(ctx, k.id); s != "" {
			return "; the server logged:\n" + s
		}
	}
	return ""
}

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
			if err = probe(ctx, conn); err == nil {
				k.conn = conn
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
// execution whose reply and idle status (iopub) must both arrive.
func probe(ctx context.Context, conn *jupyter.Conn) error {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := conn.KernelInfo(pctx); err != nil {
		return fmt.Errorf("kernel_info: %w", err)
	}
	ex, err := conn.Execute(pctx, jupyter.ExecuteRequest{Code: "", Silent: true})
	if err != nil {
		return err
	}
	defer ex.Close()
	for {
		if _, err := ex.Next(pctx); err != nil {
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("probe execution: %w", err)
		}
	}
}

// alive reports whether the kernel's connection is usable.
func (k *kernel) alive() bool {
	return k != nil && k.conn != nil && k.conn.Err() == nil && !k.abandoned()
}

// abandoned reports whether the placement said its server is gone for good.
func (k *kernel) abandoned() bool {
	if k == nil || k.lost == nil {
		return false
	}
	select {
	case <-k.lost:
		return true
	default:
		return false
	}
}

// closeOnLost closes the kernel's connection if the placement reports its server
// lost before stop is called, so that a call in flight ends at once instead of
// waiting for a server that is gone. stop ends the watch and waits for it.
func (k *kernel) closeOnLost() (stop func()) {
	if k.lost == nil || k.conn == nil {
		return func() {}
	}
	conn := k.conn
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-k.lost:
			_ = conn.Close()
		case <-quit:
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// recover tries to reconnect to the same kernel after its connection ended. It
// reports whether that worked and, when the connection ended because the server said
// the kernel died (and has restarted it under the same id), why its state is gone:
// a FileSyncer placement is then asked to set it up again (fresh).
func (k *kernel) recover(ctx context.Context, e *Executor) (ok bool, lostWhy string) {
	if k.abandoned() {
		// Its placement said the server is gone for good (a container that
		// stopped, a gateway that left): say why when the placement knows.
		// Bounded: an unreachable placement must not hold the call up.
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if cause := k.diagnose(dctx); cause != "" {
			return false, "the kernel's server went away after the previous call: " + cause
		}
		return false, ""
	}
	var died *jupyter.KernelDiedError
	if k.conn != nil && errors.As(k.conn.Err(), &died) {
		lostWhy = "the kernel died after the previous call and its server restarted it"
		if cause := k.diagnose(ctx); cause != "" {
			lostWhy += ": " + cause
		} else {
			lostWhy += " (the process exited; common causes: os._exit, a crash in native code, running out of memory)"
		}
	}
	kr, err := k.client.Kernel(ctx, k.id)
	if err != nil || kr.ExecutionState == "dead" {
		return false, lostWhy
	}
	if k.connect(ctx, e) != nil {
		return false, lostWhy
	}
	k.fresh = true
	if lostWhy != "" {
		k.count = 0
	}
	return true, lostWhy
}

// answers checks, before a call, that a kernel whose connection looks fine still
// answers: a kernel that died in the last moments, before its server noticed, would
// otherwise take the call with it and report a death that came before the call. A
// kernel_info request is harmless whichever kernel answers it. A kernel used within
// quietProbe is not asked (its last reply is that recent). It reports false when the
// connection ended meanwhile (the caller then recovers or replaces the kernel); a
// kernel that is merely slow to answer is given the call.
func (k *kernel) answers(ctx context.Context, quiet time.Duration) bool {
	if quiet < quietProbe {
		return true
	}
	pctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	if _, err := k.conn.KernelInfo(pctx); err != nil && pctx.Err() == nil {
		return false
	}
	return k.alive()
}

// quietProbe is how long a kernel may sit unused before a call first checks that it
// answers; probeWait bounds that check. A dead kernel is reported by its server
// within its restarter's poll interval (3 s by default) or, for a container or
// server that went away, by the connection's reconnect bound (5 s).
const (
	quietProbe = 200 * time.Millisecond
	probeWait  = 10 * time.Second
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
	return k.connect(ctx, e)
}

// diagnose asks the placement why the kernel died, if it can tell.
func (k *kernel) diagnose(ctx context.Context) string {
	if d, ok := k.placement.(Diagnoser); ok {
		return d.Diagnose(ctx)
	}
	return ""
}

// serverAlive reports whether the kernel's server still answers.
func (k *kernel) serverAlive(ctx context.Context) bool {
	_, err := k.client.Kernel(ctx, k.id)
	return err == nil || errors.Is(err, jupyter.ErrNotFound)
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
