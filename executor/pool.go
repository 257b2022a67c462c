package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kernelbox/kernelbox/workspace"
)

// pool keeps kernels started ahead of need, each in its own placeholder session
// directory. Taking one renames the directory to the new session's, which the kernel
// (whose working directory, or bind mount, follows the inode) does not notice. A warm
// kernel is never reused: it serves exactly one session, so it carries no state from
// another.
//
// There is a pool per template with a warm size, each member past the template's
// preload. Refills are bounded so that warm kernels never take CPU from live calls:
// the executor starts one warm kernel at a time, whichever its template
// (Executor.refill, the warm-start turn), and a start begins only while no call is
// running (Executor.running is 0), so a kernel start and its preload (imports that
// take a core for a second or more) never compete with a call that began before them.
//
// Each pool starts its kernels one after another (its fillLoop), so a template has
// at most one warm start under way. A start keeps the executor's turn for at most
// Options.WarmTurn: one still going then (a slow or hung preload) gives the turn up
// and goes on, bounded by its template's preload timeout and the start timeout, so
// that one template's failing start holds another template's pool up for WarmTurn,
// not for the whole start timeout. More than one warm start runs at once only past
// that bound, and at most one per template.
type pool struct {
	e    *Executor
	t    *Template
	size int

	mu       sync.Mutex
	ready    []*warm
	starting int

	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup
}

type warm struct {
	ws *workspace.Session
	k  *kernel
}

func newPool(e *Executor, t *Template, size int) *pool {
	return &pool{e: e, t: t, size: size, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// start starts filling; called once every pool of the executor exists.
func (p *pool) start() {
	p.wg.Add(1)
	go p.fillLoop()
}

// take hands a warm kernel to session id, or returns nil when none is ready (or the
// session's directory already exists, so the warm one cannot be renamed to it).
func (p *pool) take(ctx context.Context, id string) (*workspace.Session, *kernel) {
	return p.takeWith(ctx, id, p.e.opts.Workspace.Adopt)
}

// takeFiles hands a warm kernel to session id whose directory exists (a hibernated
// or forked session's): the session's files move into the warm directory, which
// takes the session's name (workspace.Manager.AdoptFiles). It returns nil when none
// is ready or the files cannot move (an entry in both, sessions with disks of their
// own): the warm kernel then stays in the pool and the session starts its own.
func (p *pool) takeFiles(ctx context.Context, id string) (*workspace.Session, *kernel) {
	adopt := p.e.adoptFiles
	if adopt == nil {
		adopt = p.e.opts.Workspace.AdoptFiles
	}
	return p.takeWith(ctx, id, adopt)
}

// takeWith takes the first live warm kernel and gives its directory to session id
// with adopt. A warm kernel whose adopt failed goes back to the pool, unless the
// failure left some of the session's files in its directory (workspace.ErrStranded):
// then its kernel is stopped and the directory kept.
func (p *pool) takeWith(ctx context.Context, id string, adopt func(*workspace.Session, string) (*workspace.Session, error)) (*workspace.Session, *kernel) {
	defer p.poke()
	for {
		p.mu.Lock()
		if len(p.ready) == 0 {
			p.mu.Unlock()
			return nil, nil
		}
		w := p.ready[0]
		p.ready = p.ready[1:]
		p.mu.Unlock()
		if !w.k.alive() {
			p.discard(w)
			continue
		}
		ws, err := adopt(w.ws, id)
		if errors.Is(err, workspace.ErrStranded) {
			p.e.log.Error("warm pool: a session's files could not all be put back; the warm kernel is stopped and its directory kept",
				"session", id, "warm", w.ws.ID(), "err", err)
			_ = w.k.shutdown(context.WithoutCancel(ctx), p.e.opts.ShutdownTimeout)
			_ = w.ws.Close()
			return nil, nil
		}
		if err != nil {
			// The session's directory exists already (an earlier session with
			// this id left files), or its files cannot move into the warm one:
			// give the kernel back and start normally.
			p.e.log.Debug("warm pool: not used for the session", "session", id, "err", err)
			p.mu.Lock()
			p.ready = append(p.ready, w)
			p.mu.Unlock()
			return nil, nil
		}
		if a, ok := w.k.placement.(Adopter); ok {
			p.e.adoptPlacement(ctx, a, id, w.k.id) // warm.go
		}
		p.e.log.Debug("took a warm kernel", "session", id, "template", p.t.Name, "kernel_id", w.k.id)
		return ws, w.k
	}
}

// Ready returns how many warm kernels are waiting.
func (p *pool) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}

func (p *pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// fillLoop keeps the pool full, one start at a time, and replaces members that died.
// After a failed start it waits longer each time (5 s doubling to 5 min), so that a
// template whose preload fails does not start a kernel every few seconds.
func (p *pool) fillLoop() {
	defer p.wg.Done()
	wait := poolRetry
	for {
		p.prune()
		failed := false
		for p.needsOne() {
			if !p.startOne() {
				failed = true
				break
			}
		}
		if failed {
			wait = min(wait*2, 5*time.Minute)
		} else {
			wait = poolRetry
		}
		t := time.NewTimer(wait)
		select {
		case <-p.stop:
			t.Stop()
			return
		case <-p.wake:
			if failed {
				// A take after a failure does not make the next start likelier
				// to work: keep to the backoff.
				select {
				case <-p.stop:
					t.Stop()
					return
				case <-t.C:
				}
			}
		case <-t.C:
		}
		t.Stop()
	}
}

// adoptWait bounds telling a warm kernel's placement the session that took it.
const adoptWait = 5 * time.Second

// poolRetry is how often a pool checks for members that died, and its first wait
// after a failed start.
const poolRetry = 5 * time.Second

// needsOne reports whether the pool is short and MaxSessions leaves room.
func (p *pool) needsOne() bool {
	select {
	case <-p.stop:
		return false
	default:
	}
	p.e.mu.Lock()
	live := p.e.liveCountLocked() // hibernated sessions hold no kernel
	p.e.mu.Unlock()
	all := p.e.warmHeld()
	p.mu.Lock()
	defer p.mu.Unlock()
	have := len(p.ready) + p.starting
	return have < p.size && live+all < p.e.opts.MaxSessions
}

// held returns how many kernels the pool holds or is starting.
func (p *pool) held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready) + p.starting
}

// warmHeld returns how many kernels all pools hold or are starting.
func (e *Executor) warmHeld() int {
	n := 0
	for _, p := range e.pools {
		n += p.held()
	}
	return n
}

// awaitTurn waits for the executor's one refill slot and then until no call is
// running. It returns a release func, or nil when the pool stopped meanwhile.
func (p *pool) awaitTurn() func() {
	select {
	case p.e.refill <- struct{}{}:
	case <-p.stop:
		return nil
	}
	release := func() { <-p.e.refill }
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for p.e.running.Load() > 0 {
		select {
		case <-p.stop:
			release()
			return nil
		case <-t.C:
		}
	}
	return release
}

// startOne starts one warm kernel; it reports false when starting failed (the loop
// then waits for the next tick instead of spinning).
func (p *pool) startOne() bool {
	p.mu.Lock()
	p.starting++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.starting--
		p.mu.Unlock()
	}()
	release := p.awaitTurn()
	if release == nil {
		return false
	}
	// The turn goes back when the start ends, or after WarmTurn if it is still
	// going then (see pool).
	var once sync.Once
	giveBack := func() { once.Do(release) }
	defer giveBack()
	t0 := time.Now()
	turn := time.AfterFunc(p.e.opts.WarmTurn, func() {
		p.e.log.Info("warm pool: a start is still going after its turn; the next warm start may begin beside it",
			"template", p.t.Name, "turn", p.e.opts.WarmTurn, "preload_timeout", p.t.PreloadTimeout)
		giveBack()
	})
	defer turn.Stop()
	ws, err := p.e.opts.Workspace.Warm()
	if err != nil {
		p.e.log.Warn("warm pool: create directory", "err", err)
		return false
	}
	data := p.e.dataOf(p.t)
	if err := p.e.recheckData(p.t); err != nil { // a warm kernel gets no copy of what a session may not see
		p.e.log.Warn("warm pool: data mounts", "err", err)
		_ = ws.Close()
		_ = p.e.opts.Workspace.Remove(ws.ID())
		return false
	}
	if err := p.e.copyData(ws, data); err != nil {
		p.e.log.Warn("warm pool: data mounts", "err", err)
		_ = ws.Close()
		_ = p.e.opts.Workspace.Remove(ws.ID())
		return false
	}
	ctx, cancel := context.WithTimeoutCause(context.Background(), p.e.opts.StartTimeout,
		fmt.Errorf("the start timeout (%s) ran out: %w", p.e.opts.StartTimeout, context.DeadlineExceeded))
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	k, err := p.e.startKernel(ctx, SessionSpec{ID: ws.ID(), Dir: ws.Dir(), Data: data, Template: *p.t, Warm: true})
	if err != nil {
		if ctx.Err() != nil && context.Cause(ctx) != ctx.Err() {
			err = fmt.Errorf("%w: %w", context.Cause(ctx), err)
		}
		p.e.log.Warn("warm pool: start kernel", "template", p.t.Name, "elapsed", time.Since(t0).Round(time.Millisecond), "err", err)
		_ = ws.Close()
		_ = p.e.opts.Workspace.Remove(ws.ID())
		return false
	}
	if err := p.e.warmUp(ctx, k); err != nil { // warm.go: the first result's cost, paid here
		p.e.log.Warn("warm pool: the new kernel failed its warm-up; it is stopped", "template", p.t.Name, "kernel_id", k.id, "err", err)
		p.discard(&warm{ws: ws, k: k})
		return false
	}
	p.mu.Lock()
	select {
	case <-p.stop:
		p.mu.Unlock()
		p.discard(&warm{ws: ws, k: k})
		return false
	default:
	}
	p.ready = append(p.ready, &warm{ws: ws, k: k})
	p.mu.Unlock()
	return true
}

// prune drops members whose kernel died while waiting.
func (p *pool) prune() {
	p.mu.Lock()
	var dead []*warm
	keep := p.ready[:0]
	for _, w := range p.ready {
		if w.k.alive() {
			keep = append(keep, w)
		} else {
			dead = append(dead, w)
		}
	}
	p.ready = keep
	p.mu.Unlock()
	for _, w := range dead {
		p.e.log.Info("warm pool: replacing a kernel that died while waiting", "kernel_id", w.k.id)
		p.discard(w)
	}
}

func (p *pool) discard(w *warm) {
	if err := w.k.shutdown(context.Background(), p.e.opts.ShutdownTimeout); err != nil {
		p.e.log.Warn("warm pool: shutting down a discarded kernel", "kernel_id", w.k.id, "err", err)
	}
	_ = w.ws.Close()
	if err := p.e.opts.Workspace.Remove(w.ws.ID()); err != nil {
		p.e.log.Warn("warm pool: removing a discarded kernel's directory", "kernel_id", w.k.id, "err", err)
	}
}

// close stops filling and shuts the waiting kernels down.
func (p *pool) close(ctx context.Context) {
	close(p.stop)
	p.wg.Wait()
	p.mu.Lock()
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ready {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.discard(w)
		}()
	}
	wg.Wait()
}

// acquireKernel starts a kernel for a session that has none.
func (e *Executor) acquireKernel(ctx context.Context, s *session) (*kernel, error) {
	data := e.dataOf(s.tmpl)
	if err := e.copyData(s.ws, data); err != nil {
		return nil, err
	}
	t0 := time.Now()
	k, err := e.startKernel(ctx, SessionSpec{ID: s.id, Dir: s.ws.Dir(), Data: data, Template: *s.tmpl})
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// Say which bound ended it: the caller sees "context deadline exceeded"
		// from whichever step was under way.
		return nil, fmt.Errorf("the kernel start ran out of time after %s (it is bounded by the start timeout, %s, and by the call's max wait when the call sets one): %w",
			time.Since(t0).Round(100*time.Millisecond), e.opts.StartTimeout, err)
	}
	return k, err
}

// copyData copies the data mounts into a session for backends that cannot mount them.
func (e *Executor) copyData(ws *workspace.Session, data []DataMount) error {
	if m, ok := e.opts.Backend.(DataMounter); ok && m.MountsData() {
		return nil
	}
	for _, d := range data {
		if err := ws.AddData(d.Name, d.HostDir, 0); err != nil {
			return fmt.Errorf("data mount %q: %w", d.Name, err)
		}
	}
	return nil
}
