package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// Executor runs code in stateful per-session kernels. Sessions are created on first
// use; calls on one session run one at a time in arrival order, calls on different
// sessions run in parallel. All methods are safe for concurrent use.
type Executor struct {
	opts     Options
	log      *slog.Logger
	disabled error // why execution is disabled, or nil
	perm     *permissions.Engine

	templates map[string]*Template // by name; read-only after New
	pools     map[string]*pool     // by template name; read-only after New
	refill    chan struct{}        // a token per warm kernel being started: one at a time per executor
	starting  chan struct{}        // a token per kernel starting (Options.MaxStarting); nil: no limit
	running   atomic.Int64         // calls and warm resumes running now; warm refills wait for 0

	mu       sync.Mutex
	sessions map[string]*session
	retired  map[string]retiredSession // session id -> why its state is gone, its template
	closing  map[string]chan struct{}  // session id -> closed when CloseSession has finished with it
	closed   bool

	stop chan struct{}
	wg   sync.WaitGroup

	keep *keeper // the state file's writer (keepstate.go); nil without Options.StateDir

	// adoptFiles moves a hibernated session's files into a warm directory for
	// the pools (pool.takeFiles); nil means Options.Workspace.AdoptFiles. Tests
	// set it (export_test.go) to make the move fail as the workspace can.
	adoptFiles func(*workspace.Session, string) (*workspace.Session, error)
}

// New returns an executor. It starts no kernel until the first call (or, with
// Options.Warm, the warm pool in the background).
func New(opts Options) (*Executor, error) {
	if err := checkDurableBounds(&opts); err != nil { // before the defaults replace them
		return nil, err
	}
	opts.setDefaults()
	if opts.Workspace == nil {
		return nil, errors.New("executor: Options.Workspace is required")
	}
	perm, err := optsPermissions(&opts)
	if err != nil {
		return nil, err
	}
	checked := map[string]bool{} // data directories whose files were checked
	if err := checkData(perm, opts.Data, checked); err != nil {
		return nil, err
	}
	if err := CheckKernelName(opts.Kernel); err != nil {
		return nil, fmt.Errorf("executor: Options.Kernel: %w", err)
	}
	templates, err := checkTemplates(&opts)
	if err != nil {
		return nil, err
	}
	for _, t := range templates {
		if err := checkData(perm, append(slices.Clone(opts.Data), t.Data...), checked); err != nil {
			return nil, fmt.Errorf("template %q: %w", t.Name, err)
		}
	}
	if sk, ok := opts.Backend.(StateKeeper); ok {
		opts.Workspace.Protect(sk.StateDirs()...)
	}
	e := &Executor{
		opts:     opts,
		log:      opts.Logger,
		perm:     sessionGuard(perm, opts.Workspace),
		sessions: make(map[string]*session),
		closing:  make(map[string]chan struct{}),
		stop:     make(chan struct{}),

		templates: templates,
		pools:     map[string]*pool{},
		refill:    make(chan struct{}, 1),
	}
	if n := e.maxStarting(); n > 0 {
		e.starting = make(chan struct{}, n)
	}
	switch hc, ok := opts.Backend.(HealthChecker); {
	case opts.Backend == nil:
		e.disabled = fmt.Errorf("%w: no backend is configured", api.ErrDisabled)
	case ok:
		if err := hc.Health(context.Background()); errors.Is(err, api.ErrDisabled) {
			e.disabled = err
		}
	}
	if err := e.adopt(); err != nil {
		return nil, err
	}
	if e.disabled == nil {
		for _, t := range templates {
			if t.Warm > 0 {
				e.pools[t.Name] = newPool(e, t, t.Warm)
			}
		}
		for _, p := range e.pools {
			p.start()
		}
	}
	if e.cullEvery() > 0 {
		e.wg.Add(1)
		go e.cullLoop()
	}
	return e, nil
}

// Backend returns the executor's backend name ("" when it has none; see Disabled).
func (e *Executor) Backend() string {
	if e.opts.Backend == nil {
		return ""
	}
	return e.opts.Backend.Name()
}

// Health reports whether the executor can place sessions right now: nil when its
// backend says it can (or cannot tell), the backend's problem otherwise. An executor
// with execution disabled is healthy: it does what it was configured to do.
func (e *Executor) Health(ctx context.Context) error {
	if e.disabled != nil {
		return nil
	}
	if hc, ok := e.opts.Backend.(HealthChecker); ok {
		return hc.Health(ctx)
	}
	return nil
}

// Execute runs one call and returns its result. The error is non-nil only when the
// call could not run: an invalid request (api.ErrInvalidRequest), a denial (api.ErrDenied; the
// result is then also returned, with status denied), execution disabled (api.ErrDisabled),
// overload (api.ErrTooManySessions, api.ErrQueueFull), a backend failure (api.ErrBackend) or
// shutdown (api.ErrClosed, api.ErrSessionClosed). Errors raised by the code, timeouts and
// kernel deaths are results, with a nil error.
func (e *Executor) Execute(ctx context.Context, req api.Request) (*api.Result, error) {
	return e.ExecuteStream(ctx, req, nil)
}

// Validate checks a request's shape as Execute does before anything else
// (session id, code, limits; not permissions), without running it. It returns an
// error wrapping api.ErrInvalidRequest, or nil. The calls registry uses it to refuse
// a detached call at once instead of registering one that can only fail.
func (e *Executor) Validate(req api.Request) error {
	return validateRequest(&req, &e.opts)
}

// ExecuteStream is Execute with onEvent called, on the calling goroutine's behalf but
// from the session's worker, for each output as it arrives. onEvent must not block
// for long: it holds up the session.
func (e *Executor) ExecuteStream(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error) {
	start := time.Now()
	if err := validateRequest(&req, &e.opts); err != nil {
		return nil, err
	}
	if e.disabled != nil {
		return nil, e.disabled
	}
	inputs, err := e.check(ctx, req)
	if err != nil {
		var denied *permissions.DeniedError
		if errors.As(err, &denied) {
			e.opts.Observer.CallFinished(api.StatusDenied, time.Since(start))
			return &api.Result{
				SessionID:  req.SessionID,
				Status:     api.StatusDenied,
				Outputs:    []api.Output{},
				Artifacts:  []api.Artifact{},
				Error:      &api.ErrorInfo{Ename: "PermissionDenied", Evalue: denied.Error()},
				DurationMS: time.Since(start).Milliseconds(),
			}, err
		}
		return nil, err
	}
	// A session closed by idle culling between lookup and the start of the call is
	// replaced by a fresh one: the call was never run, so it is safe to try again.
	// A call queued on a session closed on request fails, as CloseSession says.
	var res *api.Result
	for attempt := 0; ; attempt++ {
		var s *session
		if s, err = e.session(ctx, req.SessionID, req.Template); err != nil {
			return nil, err
		}
		j := newJob(ctx, jobExecute, req, inputs, onEvent, start)
		j.op, j.opBound = &s.op, e.callBound(req)
		if err = s.enqueue(j); err == nil {
			api.Queued(ctx)
			res, err = j.wait()
			if err == nil || !j.notRun || !s.culled.Load() {
				break
			}
		}
		if !errors.Is(err, api.ErrSessionClosed) || attempt >= 2 {
			return res, err
		}
	}
	if res != nil {
		e.opts.Observer.CallFinished(res.Status, time.Since(start))
	}
	return res, err
}

// check runs the permission engine over the call and returns the inputs to stage.
func (e *Executor) check(ctx context.Context, req api.Request) ([]workspace.Input, error) {
	args := map[string]any{}
	if len(req.Inputs) > 0 {
		args[permissions.InputsArg] = req.Inputs
	}
	report, err := e.perm.Check(ctx, permissions.ExecuteCapabilities(), args)
	if err != nil {
		if errors.Is(err, permissions.ErrInvalidArgument) {
			return nil, fmt.Errorf("%w: %w", api.ErrInvalidRequest, err)
		}
		if errors.Is(err, permissions.ErrDenied) {
			return nil, fmt.Errorf("%w: %w", api.ErrDenied, err)
		}
		return nil, err
	}
	var inputs []workspace.Input
	for _, rc := range report.Allowed(permissions.FilesystemRead) {
		inputs = append(inputs, workspace.Input{
			Name:      filepath.Base(rc.Requested),
			Source:    rc.Target,
			Requested: rc.Requested,
		})
	}
	return inputs, nil
}

// session returns the live session id, creating it if needed. While CloseSession is
// still tearing down an earlier session of that id (its kernel, then its directory),
// the new one waits for it, bounded by ctx: it would otherwise open the directory
// that close is about to delete.
func (e *Executor) session(ctx context.Context, id, template string) (*session, error) {
	t, err := e.template(template)
	if err != nil {
		return nil, err
	}
	for {
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return nil, api.ErrClosed
		}
		if s := e.sessions[id]; s != nil {
			e.mu.Unlock()
			if template != "" && s.tmpl != t {
				return nil, fmt.Errorf("%w: session %q was created with template %q; this call names %q (close the session to change its template)",
					api.ErrTemplateMismatch, id, s.tmpl.Name, t.Name)
			}
			return s, nil
		}
		if wait := e.closing[id]; wait != nil {
			e.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: %q is still closing: %w", api.ErrSessionClosed, id, ctx.Err())
			}
		}
		defer e.mu.Unlock()
		if n := e.liveCountLocked(); n >= e.opts.MaxSessions {
			return nil, fmt.Errorf("%w: %d sessions are live, the limit; close one, or wait for idle sessions to be closed",
				api.ErrTooManySessions, n)
		}
		if rt := e.retired[id].template; template == "" && rt != "" {
			// A session whose state was lost keeps its template (looked up
			// only when one is made: not on every call's path).
			if own, err := e.template(rt); err == nil {
				t = own
			}
		}
		s := newSession(e, id, t)
		e.sessions[id] = s
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			s.run()
		}()
		return s, nil
	}
}

// forget removes a session from the map if it is still the one registered.
func (e *Executor) forget(s *session) {
	e.mu.Lock()
	if e.sessions[s.id] == s {
		delete(e.sessions, s.id)
	}
	e.mu.Unlock()
}

func (e *Executor) lookup(id string) (*session, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, api.ErrClosed
	}
	s := e.sessions[id]
	if s == nil {
		return nil, fmt.Errorf("no such session %q: %w", id, api.ErrNotFound)
	}
	return s, nil
}

// Sessions returns the live sessions, sorted by id.
func (e *Executor) Sessions() []api.SessionInfo {
	list := e.sessionList()
	infos := make([]api.SessionInfo, 0, len(list))
	for _, s := range list {
		infos = append(infos, s.info())
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].ID < infos[j].ID })
	return infos
}

// Session returns one live session's state.
func (e *Executor) Session(id string) (api.SessionInfo, error) {
	s, err := e.lookup(id)
	if err != nil {
		return api.SessionInfo{}, err
	}
	return s.info(), nil
}

// Interrupt interrupts the session's running call, if any (as Ctrl-C would).
func (e *Executor) Interrupt(ctx context.Context, id string) error {
	s, err := e.lookup(id)
	if err != nil {
		return err
	}
	return s.interrupt(ctx)
}

// ResetSession gives the session a fresh kernel: its variables are gone, its files
// stay. It waits for calls queued before it; interrupt a running call first to stop it
// sooner.
func (e *Executor) ResetSession(ctx context.Context, id string) error {
	s, err := e.lookup(id)
	if err != nil {
		return err
	}
	j := newJob(ctx, jobReset, api.Request{SessionID: id}, nil, nil, time.Now())
	if err := s.enqueue(j); err != nil {
		return err
	}
	_, err = j.wait()
	return err
}

// CloseSession stops the session's kernel, fails its queued calls with
// api.ErrSessionClosed and deletes its directory. Its artifacts stay.
func (e *Executor) CloseSession(ctx context.Context, id string) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return api.ErrClosed
	}
	s := e.sessions[id]
	if s == nil {
		e.mu.Unlock()
		return fmt.Errorf("no such session %q: %w", id, api.ErrNotFound)
	}
	delete(e.sessions, id)
	done := make(chan struct{})
	e.closing[id] = done
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.closing, id)
		e.mu.Unlock()
		close(done)
	}()
	return s.close(ctx, true)
}

// Close stops every session and the backend, within Options.ShutdownTimeout. Calls in
// flight end (as timeouts, or with api.ErrSessionClosed if still queued). With a StateDir,
// Options.OnClose may keep the sessions' kernels running or hibernate them first,
// for the next executor to take back (keepstate.go).
func (e *Executor) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	list := e.sessionListLocked()
	e.sessions = map[string]*session{}
	e.mu.Unlock()
	close(e.stop)

	ctx, cancel := context.WithTimeout(context.Background(), e.opts.ShutdownTimeout)
	defer cancel()
	detach := e.prepareStop(ctx, list)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, s := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.close(ctx, false); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, p := range e.pools {
		p.close(ctx)
	}
	e.wg.Wait()
	if r, ok := e.opts.Backend.(Reattacher); ok && detach {
		if err := r.Detach(ctx); err != nil {
			errs = append(errs, fmt.Errorf("detach backend: %w", err))
		}
	} else if e.opts.Backend != nil {
		if err := e.opts.Backend.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close backend: %w", err))
		}
	}
	return errors.Join(errs...)
}

// CreateSession creates session id with a template ("" is the default one) without
// starting its kernel; its first call starts one or takes a warm one. A session
// that exists already is returned as it is when template is empty or its own, and
// is an error wrapping api.ErrTemplateMismatch otherwise. It also fails with
// api.ErrInvalidRequest (the id, an unknown template), api.ErrTooManySessions and api.ErrClosed.
func (e *Executor) CreateSession(ctx context.Context, id, template string) (api.SessionInfo, error) {
	if !api.ValidSessionID(id) {
		return api.SessionInfo{}, invalidf("invalid session id %q: use %s", clip(id, 80), api.SessionIDRule)
	}
	if e.disabled != nil {
		return api.SessionInfo{}, e.disabled
	}
	s, err := e.session(ctx, id, template)
	if err != nil {
		return api.SessionInfo{}, err
	}
	return s.info(), nil
}

// sessionList returns the registered sessions, in no order.
func (e *Executor) sessionList() []*session {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sessionListLocked()
}

// sessionListLocked is sessionList with e.mu held.
func (e *Executor) sessionListLocked() []*session {
	list := make([]*session, 0, len(e.sessions))
	for _, s := range e.sessions {
		list = append(list, s)
	}
	return list
}
