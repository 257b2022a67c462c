package executor

import (
	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/jupyter"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kernelbox/kernelbox/workspace"
)

// session is one agent's kernel and files. Its worker goroutine owns the kernel and
// the workspace session and runs its jobs one at a time; mu guards what Sessions and
// Interrupt read.
type session struct {
	e     *Executor
	id    string
	tmpl  *Template // chosen at creation, kept for the session's life
	log   *slog.Logger
	queue chan *job

	ctx    context.Context // canceled when the session closes
	cancel context.CancelFunc
	done   chan struct{} // closed when the worker has exited and released the kernel
	once   sync.Once
	culled atomic.Bool // closed for being idle, not on request: its queued calls may run elsewhere

	// qmu orders enqueue against release: once released is set no job enters the
	// queue, so release's drain fails every job that did (a job put in after the
	// drain would wait forever).
	qmu      sync.Mutex
	released bool

	// owned by the worker
	ws        *workspace.Session
	k         *kernel
	lost      bool   // the next result reports state_lost
	lostWhy   string // and says why
	everAlive bool
	sleep     *sleepState        // the saved namespace while hibernated (hibernate.go)
	restored  *api.StateRestored // the next result's StateRestored
	ckpt      checkpointState    // after-call checkpoints (checkpoint.go)

	// asleep mirrors sleep != nil for readers off the worker (live session count,
	// the idle cull); waking says a hibernated session holds a place among
	// MaxSessions while its kernel starts (roomToWake).
	asleep      atomic.Bool
	waking      atomic.Bool
	hibernating atomic.Bool // the cull has a hibernate job on its way

	// interrupted: a caller asked for an interrupt during the running call, so a
	// KeyboardInterrupt it ends with is theirs (cleared as each call starts).
	interrupted atomic.Bool

	// running is the execution an interrupt may stop: a call's code or a
	// snapshot's load, while it is in flight (nil otherwise). intrMu is held
	// while an interrupt is delivered; the worker takes it before it sends the
	// kernel a request (afterInterrupts), so that no interrupt meant for what ran
	// before lands in that request (interrupt).
	running atomic.Pointer[jupyter.Execution]
	intrMu  sync.Mutex

	// detached: the executor closes with StopKeep, so release lets go of the
	// kernel without stopping it (keepstate.go).
	detached atomic.Bool

	// op names the operation the worker runs now (a hibernate, a fork, a
	// checkpoint...; nil during a call or when idle): a call queued behind one
	// answers within its own bound (job.wait).
	op atomic.Pointer[string]

	taps taps // the session's watchers (watch.go)

	mu      sync.Mutex
	state   api.SessionInfo
	noSleep string  // why the last idle hibernation failed; cleared by a call (cull.go)
	kref    *kernel // the kernel, for Interrupt
	whole   int     // the last acknowledged call that left the namespace whole (wholelog.go)
	// adopting is the kernel id an adopted session is reconnecting to (until
	// takeBack ends), so the state file keeps listing it meanwhile.
	adopting string
}

func newSession(e *Executor, id string, t *Template) *session {
	ctx, cancel := context.WithCancel(context.Background())
	now := time.Now()
	s := &session{
		e:      e,
		id:     id,
		tmpl:   t,
		log:    e.log.With("session", id, "template", t.Name),
		queue:  make(chan *job, e.opts.QueueSize),
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
		state:  api.SessionInfo{ID: id, Template: t.Name, State: api.StateNew, Created: now, LastActivity: now},
	}
	if why, ok := e.takeRetired(id); ok {
		s.lost, s.lostWhy = true, why
	}
	return s
}

// enqueue adds a job, failing at once when the queue is full or the session closed.
func (s *session) enqueue(j *job) error {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.released || s.ctx.Err() != nil {
		return fmt.Errorf("%w: %q", api.ErrSessionClosed, s.id)
	}
	busy := s.snapshot().State == "busy" || len(s.queue) > 0
	select {
	case s.queue <- j:
	default:
		return fmt.Errorf("%w: session %q has %d calls waiting (the limit); wait for them or interrupt the running one",
			api.ErrQueueFull, s.id, cap(s.queue))
	}
	if busy {
		j.emit(api.Event{Type: "status", State: "queued"})
	}
	return nil
}

// run is the session's worker loop.
func (s *session) run() {
	defer close(s.done)
	defer s.release()
	for {
		select {
		case <-s.ctx.Done():
			return
		case j := <-s.queue:
			if !j.begin() {
				continue
			}
			if j.kind == jobFiles {
				s.runFiles(j)
				continue
			}
			if j.kind == jobFunc {
				if j.opName != "" {
					s.op.Store(&j.opName)
				}
				err := j.fn(s)
				s.op.Store(nil)
				s.touch(nil) // before finish: the caller reads the state it left
				j.finish(nil, err)
				continue
			}
			s.setState(api.StateBusy)
			var r *api.Result
			var err error
			switch j.kind {
			case jobReset:
				err = s.reset(j)
			default:
				s.e.running.Add(1)
				r, err = s.executeWatched(j)
				s.e.running.Add(-1)
			}
			s.touch(r)
			switch {
			case err == nil && j.kind == jobReset:
				s.noteReset()
			case err == nil:
				s.noteWhole(r) // before the result is delivered
				// Marked before the result is out: a stop that follows the
				// answer at once waits for its checkpoint (settleCheckpoints).
				s.op.Store(&opCheckpoint)
			}
			j.finish(r, err)
			if err == nil && j.kind != jobReset {
				s.afterCall(r)
			}
			s.op.Store(nil)
		}
	}
}

// release shuts the kernel down and fails the jobs still queued.
func (s *session) release() {
	s.qmu.Lock()
	s.released = true
	s.qmu.Unlock()
	defer s.e.stateChanged()
	defer s.taps.send(Watched{Kind: WatchClosed})
	for {
		select {
		case j := <-s.queue:
			if j.begin() {
				j.notRun = true
				j.finish(nil, fmt.Errorf("%w: %q", api.ErrSessionClosed, s.id))
			}
			continue
		default:
		}
		break
	}
	if s.detached.Load() {
		s.detach()
		return
	}
	if s.k != nil {
		if err := s.k.shutdown(context.Background(), s.e.opts.ShutdownTimeout); err != nil {
			s.log.Warn("shutting down kernel", "err", err)
		}
		s.setKernel(nil)
	}
	if s.ws != nil {
		// Closed on request, its checkpoint goes (its directory does too); a
		// stop of the whole executor keeps it for the next start (prepareStop).
		if !s.e.stopping() {
			s.dropCheckpoint(s.ws.Dir())
		}
		_ = s.ws.Close()
	}
	if s.asleep.Swap(false) {
		snapObserver(s.e.opts.Observer).Hibernated(-1)
	}
	s.e.opts.Workspace.Unpin(s.id)
}

// close stops the worker (a running call ends at once) and waits for it to release
// the kernel, bounded by ctx. With removeDir it deletes the session directory.
func (s *session) close(ctx context.Context, removeDir bool) error {
	s.once.Do(s.cancel)
	select {
	case <-s.done:
	case <-ctx.Done():
		return fmt.Errorf("close session %q: %w", s.id, ctx.Err())
	}
	if removeDir {
		if err := s.e.opts.Workspace.Remove(s.id); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("close session %q: %w", s.id, err)
		}
	}
	return nil
}

// reset restarts the kernel: a fresh interpreter, same files.
func (s *session) reset(j *job) error {
	if s.ws != nil {
		s.dropCheckpoint(s.ws.Dir())
	}
	if s.sleep != nil {
		s.discardSnapshot()
	}
	if s.k == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.e.opts.StartTimeout)
	defer cancel()
	if err := s.restartKernel(ctx); err != nil {
		s.log.Warn("reset: restart failed; starting a new kernel", "err", err)
		if s.k != nil {
			_ = s.k.shutdown(ctx, s.e.opts.ShutdownTimeout)
			s.setKernel(nil)
		}
		return s.ensureKernel(j)
	}
	s.setKernel(s.k)
	return nil
}

// restartKernel gives the session's kernel a fresh interpreter: a restart in place,
// or, for a ResetReplacer placement, a new kernel on a new placement once the old
// one is shut down. It reports no lost state of its own: its callers say what the
// restart means. After an error the session may have no kernel.
func (s *session) restartKernel(ctx context.Context) error {
	if r, ok := s.k.placement.(ResetReplacer); !ok || !r.ReplaceOnReset() {
		return s.k.restart(ctx, s.e)
	}
	if err := s.k.shutdown(ctx, s.e.opts.ShutdownTimeout); err != nil {
		s.log.Warn("replacing kernel: shutting down the old one", "err", err)
	}
	s.setKernel(nil)
	s.setState(api.StateStarting)
	k, err := s.e.acquireKernel(ctx, s)
	if err != nil {
		return err
	}
	s.setKernel(k)
	return nil
}

// interrupt interrupts the running call's code, or a snapshot's load, if the
// kernel is in it now; otherwise it does nothing (the running call's kernel is
// starting, its files being staged, or the session is idle). An interrupt is
// sent only then because ipykernel takes one that lands in its own handling of
// a request, rather than in the cell's code, as a KeyboardInterrupt in that
// handling: the request's reply is dropped, or the kernel's shell stops for good
// (jupyter.Execution.InCode). Each interrupt is delivered before the worker
// sends the kernel its next request (afterInterrupts).
func (s *session) interrupt(ctx context.Context) error {
	s.intrMu.Lock()
	defer s.intrMu.Unlock()
	return s.interruptLocked(ctx)
}

// interruptLocked is interrupt with s.intrMu held. The server is given
// interruptBound to take it.
func (s *session) interruptLocked(ctx context.Context) error {
	s.mu.Lock()
	k := s.kref
	s.mu.Unlock()
	ex := s.running.Load()
	if k == nil || ex == nil || !ex.InCode() {
		return nil
	}
	s.interrupted.Store(true)
	ctx, cancel := context.WithTimeout(ctx, interruptBound)
	defer cancel()
	return k.client.Interrupt(ctx, k.id)
}

// afterInterrupts returns once no interrupt is being delivered to the session's
// kernel: the worker calls it before it sends the kernel a request that must not
// be hit by an interrupt meant for the one before.
func (s *session) afterInterrupts() {
	s.intrMu.Lock()
	//nolint:staticcheck // an empty critical section: a barrier
	s.intrMu.Unlock()
}

func (s *session) markLost(why string) {
	if !s.lost {
		s.lost, s.lostWhy = true, why
	}
}

// takeLost returns and clears the pending state-lost report.
func (s *session) takeLost() (bool, string) {
	lost, why := s.lost, s.lostWhy
	s.lost, s.lostWhy = false, ""
	return lost, why
}

func (s *session) setKernel(k *kernel) {
	s.k = k
	defer s.e.stateChanged()
	s.mu.Lock()
	old := s.kref
	s.kref = k
	if k == nil {
		s.state.KernelID = ""
		s.state.State = api.StateDead
		s.mu.Unlock()
		return
	}
	var line *wholeLine
	if k != old {
		// Another kernel (a start, a resume, a restore, a take back): the
		// count is that kernel's, so that a restart that takes it back does
		// not read a lower count than the last kernel's as a death
		// (checkRestarted). An adopted kernel comes with its own (k.count).
		// The journal says so too: its last line of the session, from the
		// last call, would otherwise bring the old count back at the next
		// start (readKept).
		s.state.ExecutionCount = k.count
		line = &wholeLine{ID: s.id, Whole: s.whole, Count: k.count}
	}
	s.state.KernelID = k.id
	if d, ok := k.placement.(SessionDirer); ok && s.ws != nil {
		s.state.Dir = d.KernelDir(s.ws.Dir())
	}
	s.mu.Unlock()
	if line != nil {
		s.e.appendWhole(*line) // not under s.mu: a fold of the journal reads the sessions
	}
}

func (s *session) setState(state api.SessionState) {
	s.mu.Lock()
	s.state.State = state
	s.mu.Unlock()
}

// touch records the end of a job.
func (s *session) touch(r *api.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.LastActivity = time.Now()
	if r != nil {
		s.noSleep = ""
		s.state.Calls++
		if r.ExecutionCount > 0 {
			s.state.ExecutionCount = r.ExecutionCount
		}
	}
	switch {
	case s.asleep.Load(): // a call could not wake it
		s.state.State = api.StateHibernated
	case s.kref == nil && s.state.State != api.StateNew:
		s.state.State = api.StateDead
	case s.kref != nil && !s.kref.alive():
		s.state.State = api.StateDead
	case s.kref != nil:
		s.state.State = api.StateIdle
	}
}

func (s *session) snapshot() api.SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

func (s *session) info() api.SessionInfo {
	i := s.snapshot()
	i.Queued = len(s.queue)
	return i
}

// idleFor returns how long the session has had nothing to do, or 0 when it is busy
// or has calls queued.
func (s *session) idleFor() time.Duration {
	i := s.info()
	if i.State == "busy" || i.State == "starting" || i.Queued > 0 {
		return 0
	}
	return time.Since(i.LastActivity)
}

// hibernatedFor returns how long the session has been hibernated (0 when it is not).
func (s *session) hibernatedFor() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state.Hibernated.IsZero() {
		return 0
	}
	return time.Since(s.state.Hibernated)
}
