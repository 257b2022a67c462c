package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
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

	// language is the kernel's language_info.name from its kernel_info reply
	// ("python", "R"), or "" when it did not say. Only a Python kernel
	// is sent Python (the FileSyncer's probe; see python).
	language string

	// lost is the placement's LossReporter channel, or nil: once it is closed the
	// kernel is abandoned, never reconnected to.
	lost <-chan struct{}

	// tmpl is the template whose preload (and environment, when envByCode) every
	// fresh interpreter of this kernel gets (prepare).
	tmpl      *Template
	envByCode bool
}

// startKernel places a session, starts its kernel and connects to it. A server that
// went away while it was asked to start the kernel (killed as frozen, say) is
// replaced: the placement is asked for again, once.
func (e *Executor) startKernel(ctx context.Context, spec SessionSpec) (*kernel, error) {
	release, err := e.startSlot(ctx, spec.ID)
	if err != nil {
		return nil, err
	}
	defer release()
	k, err := e.startKernelOnce(ctx, spec)
	var gone *serverGoneError
	if errors.As(err, &gone) && ctx.Err() == nil {
		e.log.Warn("the server went away while starting a kernel; placing the session again", "session", spec.ID, "err", gone.err)
		k, err = e.startKernelOnce(ctx, spec)
	}
	if err != nil {
		return nil, e.explainKernel(ctx, spec, err)
	}
	t := spec.Template
	k.tmpl = &t
	if len(t.Env) > 0 {
		sa, ok := e.opts.Backend.(SpecApplier)
		k.envByCode = !ok || !sa.Applies().Env
	}
	if err := e.prepare(ctx, k); err != nil {
		_ = k.shutdown(context.Background(), e.opts.ShutdownTimeout)
		return nil, err
	}
	return k, nil
}

// explainKernel adds, to a kernel start that failed for a template naming a
// kernelspec, the kernelspecs the server offers when the named one is not among
// them.
func (e *Executor) explainKernel(ctx context.Context, spec SessionSpec, err error) error {
	name := spec.Template.Kernel
	var he *jupyter.HTTPError
	if name == "" || name == "python3" || !errors.As(err, &he) {
		return err
	}
	p, oerr := e.opts.Backend.Open(ctx, SessionSpec{ID: spec.ID, Dir: spec.Dir, Data: spec.Data})
	if oerr != nil {
		return err
	}
	defer p.Close(context.WithoutCancel(ctx))
	c, cerr := jupyter.NewClient(p.Server().Endpoint, &jupyter.ClientOptions{Logger: e.log})
	if cerr != nil {
		return err
	}
	defer c.CloseIdle()
	ks, kerr := c.KernelSpecs(ctx)
	if kerr != nil {
		return err
	}
	if _, ok := ks.KernelSpecs[name]; ok {
		return err
	}
	var have []string
	for n := range ks.KernelSpecs {
		if n != serverflags.KernelName {
			have = append(have, n)
		}
	}
	sort.Strings(have)
	return fmt.Errorf("template %q: kernel %q is not installed where the %s backend runs kernels (it has: %s): %w",
		spec.Template.Name, name, e.Backend(), strings.Join(have, ", "), err)
}

// maxStarting is Options.MaxStarting with its default: the backend's
// StartLimiter, else no limit (0).
func (e *Executor) maxStarting() int {
	switch n := e.opts.MaxStarting; {
	case n < 0:
		return 0
	case n > 0:
		return n
	}
	if sl, ok := e.opts.Backend.(StartLimiter); ok {
		return max(sl.MaxStarting(), 0)
	}
	return 0
}

// startSlot waits for one of the MaxStarting slots of kernels being started and
// returns its release; with no limit it returns at once. The wait is bounded by
// ctx (the start's StartTimeout and the call's own bound).
func (e *Executor) startSlot(ctx context.Context, session string) (func(), error) {
	if e.starting == nil {
		return func() {}, nil
	}
	t0 := time.Now()
	select {
	case e.starting <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("start kernel: waited %s for one of the %d kernel start slots (all busy starting other sessions' kernels): %w",
			time.Since(t0).Round(time.Millisecond), cap(e.starting), context.Cause(ctx))
	}
	if w := time.Since(t0); w > time.Second {
		e.log.Debug("waited for a kernel start slot", "session", session, "waited", w.Round(time.Millisecond), "slots", cap(e.starting))
	}
	return func() { <-e.starting }, nil
}

// serverGoneError is a kernel start that failed below HTTP: the server's connection
// broke (no answer at all), so another placement may well work.
type serverGoneError struct{ err error }

func (e *serverGoneError) Error() string { return e.err.Error() }
func (e *serverGoneError) Unwrap() error { return e.err }

func (e *Executor) startKernelOnce(ctx context.Context, spec SessionSpec) (_ *kernel, err error) {
	if err := CheckKernelName(spec.Template.Kernel); err != nil {
		return nil, err
	}
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
	_, syncs := p.(FileSyncer)
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
			if he != nil && srv.KernelName != "" {
				if missing := k.missingSpec(ctx, srv.KernelName); missing != nil {
					return nil, missing
				}
			}
			return nil, err
		}
		k.id, k.fresh = kr.ID, true
		e.opts.Observer.KernelStarted()
		err = k.connect(ctx, e)
		if err == nil && syncs && !k.python() {
			// The syncer's code (inputs pushed, outputs pulled) is Python: in any
			// other kernel each call would fail on it, or worse, run it as that
			// language's code.
			return nil, fmt.Errorf("%w: kernel %q speaks %s, and the %s backend moves the session's files through the kernel with Python code, so it runs Python kernels only", ErrKernelUnavailable, srv.KernelName, k.languageName(), e.opts.Backend.Name())
		}
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

// missingSpec returns an error wrapping ErrKernelUnavailable when the server has no
// kernelspec called name (listing those it has), or nil when it has one or cannot
// tell: a start refused for another reason keeps its own error.
func (k *kernel) missingSpec(ctx context.Context, name string) error {
	ks, err := k.client.KernelSpecs(ctx)
	if err != nil {
		return nil
	}
	if _, ok := ks.KernelSpecs[name]; ok {
		return nil
	}
	names := make([]string, 0, len(ks.KernelSpecs))
	for n := range ks.KernelSpecs {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Errorf("%w: the server has no kernelspec %q (it offers: %s)", ErrKernelUnavailable, name, strings.Join(names, ", "))
}

// python reports whether the kernel said it runs Python. A kernel that did not say
// (an old or minimal one) is taken for Python, as every kernel was before kernel
// names could be chosen.
func (k *kernel) python() bool { return k.language == "" || strings.EqualFold(k.language, "python") }

// languageName is the kernel's language for messages.
func (k *kernel) languageName() string {
	if k.language == "" {
		return "an unnamed language"
	}
	return k.language
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
		// A new interpreter: the template's preload again.
		if err := e.prepare(ctx, k); err != nil {
			return false, lostWhy + "; " + err.Error()
		}
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
	if err := k.connect(ctx, e); err != nil {
		return err
	}
	return e.prepare(ctx, k)
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
