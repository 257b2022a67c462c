package executor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
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

	// exited is the KernelWatcher's check of the kernel's process, or nil (no
	// watcher, or it could not find the process): set at each connection.
	exited func() bool

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
		if n != api.OwnKernelName {
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
		kr, err := k.startOnServer(ctx, start)
		if err == nil && ctx.Err() != nil {
			// Stopped waiting meanwhile (the session was closed): the kernel the
			// server started is stopped by the deferred shutdown, not left running.
			k.id = kr.ID
			return nil, ctx.Err()
		}
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

// startGrace is how long a kernel start request may outlive the wait of the call
// that made it.
const startGrace = 10 * time.Second

// startOnServer sends the start request under a context that ctx's cancellation does
// not cut (ctx's deadline plus startGrace still bounds it): the server starts the
// kernel whether or not kernelbox still waits, and a start abandoned mid-request
// left a kernel nobody knew the id of, running in a closed session's directory and
// keeping its disk busy (seen in TestServeSoak: a close racing a call's start).
func (k *kernel) startOnServer(ctx context.Context, start jupyter.StartOptions) (*jupyter.Kernel, error) {
	sctx := context.WithoutCancel(ctx)
	var cancel context.CancelFunc
	if dl, ok := ctx.Deadline(); ok {
		sctx, cancel = context.WithDeadline(sctx, dl.Add(startGrace))
	} else {
		sctx, cancel = context.WithTimeout(sctx, 2*time.Minute+startGrace)
	}
	defer cancel()
	return k.client.StartKernel(sctx, start)
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
