package executor

// Adoption (issue 34 item 1): an executor made with the StateDir of one that ended
// (SIGKILL, or Close with StopKeep or StopHibernate) takes its sessions back. The
// state file (keepstate.go) says which session ran which kernel with which
// template; a Reattacher backend gives back the placements that still run. A
// session whose placement is back keeps its id, template, kernel and variables;
// one whose placement is not (its container removed by hand meanwhile, a backend
// whose kernels end with kernelbox) is retired with the reason, which its next
// call reports as state_lost; a hibernated one is listed hibernated again.
// Placements nobody claims are closed.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/jupyter"
)

// adoptBusyWait bounds how long an adopted kernel that still runs a call of the
// old process is given to stop after its interrupt.
const adoptBusyWait = 10 * time.Second

// adopt reads the state file and takes back what it lists (see the file comment),
// then starts the state writer. A state file that cannot be read adopts nothing
// (it is set aside as sessions.json.bad, and logged), and what the backend kept
// is closed as leftovers.
func (e *Executor) adopt() error {
	if e.opts.StateDir == "" {
		return nil
	}
	byID, err := e.readKept()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.StartTimeout)
	defer cancel()
	placed := e.reattach(ctx, byID)
	adopted, hibernated, lost := 0, 0, 0
	for id, rec := range byID {
		t := e.templates[rec.Template]
		r := placed[id]
		var why string // why the kernel did not come back
		switch {
		case t == nil:
			e.retire(id, "", fmt.Sprintf("kernelbox restarted and the session's template %q is no longer configured"+stateGone, rec.Template))
			lost++
			continue
		case rec.Lost != "":
			why = strings.TrimSuffix(rec.Lost, stateGone) // written with it by a stop
		case rec.Snapshot != nil && rec.KernelID != "":
			// Killed while the snapshot loaded (or after a hibernation saved it, while
			// the kernel stopped): the kernel holds part of the
			// namespace, the snapshot all of it (removed only after a whole
			// load). Never the half kernel as whole: hibernated again.
			if r.Placement != nil {
				e.log.Warn("a kept kernel was loading or saving its session's snapshot when kernelbox stopped; it is closed and the session stays hibernated", "session", id)
				if err := r.Placement.Close(ctx); err != nil {
					e.log.Warn("closing a half-restored placement", "session", id, "err", err)
				}
			}
			rec.KernelID = ""
			e.adoptHibernated(rec, t)
			hibernated++
			continue
		case r.Placement != nil:
			e.adoptLive(rec, t, r.Placement)
			adopted++
			continue
		case r.Lost != "":
			why = "kernelbox restarted and the session's kernel could not be taken back: " + r.Lost
		case rec.Snapshot != nil && rec.KernelID == "":
			e.adoptHibernated(rec, t)
			hibernated++
			continue
		default:
			why = fmt.Sprintf("kernelbox restarted and the session's kernel did not outlive it (the %s backend kept none)", e.Backend())
		}
		if e.adoptCheckpointed(rec, t, why) {
			adopted++
			continue
		}
		e.retire(id, rec.Template, why+stateGone)
		lost++
	}
	if len(byID) > 0 {
		e.log.Info("sessions taken back after a restart", "adopted", adopted, "hibernated", hibernated, "lost", lost)
	}
	// What the whole-call journal said is in the records now: on disk first,
	// then the journal is emptied.
	e.flushState()
	e.emptyWhole()
	e.wg.Add(1)
	go e.keepLoop()
	return nil
}

// readKept opens the state dir (0700) and reads the kept sessions' records, by id,
// with what the whole-call journal says is newer; a state file that cannot be used
// is set aside as .bad (told), and no session is adopted.
func (e *Executor) readKept() (map[string]keptSession, error) {
	if err := os.MkdirAll(e.opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("executor: state dir: %w", err)
	}
	if err := os.Chmod(e.opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("executor: state dir: %w", err)
	}
	e.keep = &keeper{path: filepath.Join(e.opts.StateDir, stateFileName), dirty: make(chan struct{}, 1)}
	recs, err := readState(e.keep.path)
	if err != nil {
		e.log.Error("the sessions' state cannot be used: no session is adopted, and what they left is removed", "err", err)
		_ = os.Rename(e.keep.path, e.keep.path+".bad")
		recs = nil
	}
	byID := make(map[string]keptSession, len(recs))
	whole := readWhole(e.opts.StateDir)
	for _, r := range recs {
		if api.ValidSessionID(r.ID) {
			if l, ok := whole[r.ID]; ok { // newer than the state file's record
				r.Whole = max(r.Whole, l.Whole)
				r.ExecutionCount = l.Count
			}
			byID[r.ID] = r
		}
	}
	return byID, nil
}

// reattach asks a Reattacher backend for its kept placements and returns those of
// sessions in byID, by session; it closes the others.
func (e *Executor) reattach(ctx context.Context, byID map[string]keptSession) map[string]Reattached {
	placed := map[string]Reattached{}
	ra, ok := e.opts.Backend.(Reattacher)
	if !ok || e.disabled != nil {
		return placed
	}
	list, err := ra.Reattach(ctx)
	if err != nil {
		e.log.Error("the backend kept no session", "err", err)
	}
	for _, r := range list {
		rec, ok := byID[r.Session]
		if r.Placement != nil && (!ok || rec.KernelID == "" || e.templates[rec.Template] == nil) {
			e.log.Info("closing a kept placement no session claims", "session", r.Session)
			if err := r.Placement.Close(ctx); err != nil {
				e.log.Warn("closing an unclaimed placement", "session", r.Session, "err", err)
			}
			continue
		}
		if r.Placement != nil && r.KernelID != "" && r.KernelID != rec.KernelID {
			e.log.Warn("a kept placement's kernel is not the session's; closing it", "session", r.Session, "kernel_id", rec.KernelID, "backend_kernel_id", r.KernelID)
			if err := r.Placement.Close(ctx); err != nil {
				e.log.Warn("closing a mismatched placement", "session", r.Session, "err", err)
			}
			r = Reattached{Session: r.Session, Lost: fmt.Sprintf("the backend kept kernel %s for the session, whose record names kernel %s", r.KernelID, rec.KernelID)}
		}
		placed[r.Session] = r
	}
	return placed
}

// retire records that session id's state is gone, and why: its next call says so
// (and gets template again when it names none).
func (e *Executor) retire(id, template, why string) {
	e.log.Warn("session not taken back after a restart", "session", id, "reason", why)
	e.mu.Lock()
	e.retireLocked(id, template, why)
	e.mu.Unlock()
}

// startAdopted registers s and starts its worker, with first as its first job.
func (e *Executor) startAdopted(s *session, first func(*session) error) {
	if first != nil {
		j := newJob(context.Background(), jobFunc, api.Request{SessionID: s.id}, nil, nil, time.Now())
		j.fn = first
		_ = s.enqueue(j) // the queue is empty: it has room
	}
	e.mu.Lock()
	e.sessions[s.id] = s
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		s.run()
	}()
}

// adoptLive takes back a session whose placement p the backend gave back: its
// worker's first job reconnects to the kernel (takeBack); calls queue behind it.
func (e *Executor) adoptLive(rec keptSession, t *Template, p Placement) {
	s := newSession(e, rec.ID, t)
	s.state.Created, s.state.Calls, s.state.ExecutionCount = rec.Created, rec.Calls, rec.ExecutionCount
	s.state.State = api.StateStarting
	s.keepCheckpoint(rec)
	s.adopting = rec.KernelID
	k := &kernel{placement: p, id: rec.KernelID}
	if lr, ok := p.(LossReporter); ok {
		k.lost = lr.Lost()
	}
	tc := *t
	k.tmpl = &tc
	if len(t.Env) > 0 {
		sa, ok := e.opts.Backend.(SpecApplier)
		k.envByCode = !ok || !sa.Applies().Env
	}
	e.startAdopted(s, func(s *session) error {
		s.takeBack(k)
		return nil
	})
}

// adoptHibernated lists a session hibernated at the last stop as hibernated: its
// next call (or a resume) restores its snapshot as after any hibernation.
func (e *Executor) adoptHibernated(rec keptSession, t *Template) {
	s := newSession(e, rec.ID, t)
	info := *rec.Snapshot
	s.sleep = &sleepState{info: info, from: "hibernation"}
	s.asleep.Store(true)
	snapObserver(e.opts.Observer).Hibernated(1)
	s.state.Created, s.state.Calls, s.state.ExecutionCount = rec.Created, rec.Calls, rec.ExecutionCount
	s.state.State, s.state.Snapshot, s.state.Hibernated = api.StateHibernated, &info, info.Taken
	s.keepCheckpoint(rec)
	e.opts.Workspace.Pin(s.id)
	e.startAdopted(s, nil)
}

// stateGone ends the reason a session is told when its state did not survive a
// restart.
const stateGone = ": its variables are gone, its files are kept"

// adoptCheckpointed takes back a session whose kernel did not survive the restart
// but whose template checkpoints and whose record names a checkpoint: its next
// call starts a kernel and restores the checkpoint (restoreCheckpoint), saying
// why the kernel was replaced. It reports false, doing nothing, otherwise.
func (e *Executor) adoptCheckpointed(rec keptSession, t *Template, why string) bool {
	if rec.Checkpoint == nil || t.Checkpoint != CheckpointAfterCall {
		return false
	}
	s := newSession(e, rec.ID, t)
	s.state.Created, s.state.Calls, s.state.ExecutionCount = rec.Created, rec.Calls, rec.ExecutionCount
	s.state.State = api.StateDead
	s.keepCheckpoint(rec)
	s.markLost(why)
	e.startAdopted(s, nil)
	return true
}

// keepCheckpoint gives an adopted session the checkpoint its record names, when
// its template still checkpoints, so that a kernel lost across the restart (or
// later) is restored from it. The calls after it count as changed: a restore
// says they are lost unless the checkpoint is of the last one. Run before the
// session's worker starts.
func (s *session) keepCheckpoint(rec keptSession) {
	c := rec.Checkpoint
	if c == nil || s.tmpl.Checkpoint != CheckpointAfterCall {
		return
	}
	s.ckpt.last = &checkpoint{afterCall: c.AfterCall, info: c.SnapshotInfo}
	s.ckpt.lastWhole = rec.Calls
	if rec.Whole > 0 { // the journal's: acknowledged, maybe after the state was last written
		s.ckpt.lastWhole = rec.Whole
		s.state.Calls = max(s.state.Calls, rec.Whole)
	}
	s.whole = s.ckpt.lastWhole
	s.state.Checkpoint = c
}

// takeBack connects the session to its adopted kernel k, on the session's worker. A
// kernel still running a call of the old process is interrupted first (that call's
// answer is lost with the process; the calls registry says so). When the kernel
// cannot be reached, it and its placement are shut down and the next call starts a
// fresh kernel, reporting state_lost with the reason.
func (s *session) takeBack(k *kernel) {
	ctx, cancel := context.WithTimeout(s.ctx, s.e.opts.StartTimeout)
	defer cancel()
	defer func() {
		s.mu.Lock()
		s.adopting = ""
		s.mu.Unlock()
		s.e.stateChanged()
	}()
	fail := func(why string) {
		s.log.Warn("adopted kernel cannot be reached; the next call starts a fresh one", "reason", why)
		s.markLost("kernelbox restarted and the session's kernel could not be reached again (" + why + "): its variables are gone, its files are kept")
		_ = k.shutdown(ctx, s.e.opts.ShutdownTimeout)
		s.setState(api.StateDead)
	}
	c, err := jupyter.NewClient(k.placement.Server().Endpoint, &jupyter.ClientOptions{Logger: s.e.log})
	if err != nil {
		fail(err.Error())
		return
	}
	k.client = c
	if err := k.stopOldCall(ctx, s); err != nil {
		fail(err.Error())
		return
	}
	if err := k.connect(ctx, s.e); err != nil {
		fail(err.Error())
		return
	}
	s.checkRestarted(ctx, k)
	s.everAlive = true // the directory is this kernel's: not "from an earlier kernel"
	if err := s.openWorkspace(); err != nil {
		fail(err.Error())
		return
	}
	s.setKernel(k)
	s.setState(api.StateIdle)
	s.log.Info("session adopted", "kernel_id", k.id)
}

// stopOldCall finds the adopted kernel on its server and interrupts it, whatever
// its server says of it: a call of the old process may still run there (the
// server's execution_state was seen "idle" for a kernel in the middle of a
// time.sleep), and an interrupt of an idle Python kernel does nothing. It then
// waits, up to adoptBusyWait, while the server says the kernel is busy; the
// connection's kernel_info probe waits for the rest.
func (k *kernel) stopOldCall(ctx context.Context, s *session) error {
	km, err := k.client.Kernel(ctx, k.id)
	if err != nil {
		return fmt.Errorf("kernel %s: %w", k.id, err)
	}
	if err := k.client.Interrupt(ctx, k.id); err != nil {
		return fmt.Errorf("interrupt kernel %s: %w", k.id, err)
	}
	s.log.Debug("adopted kernel interrupted, in case a call of the previous process still ran", "kernel_id", k.id, "execution_state", km.ExecutionState)
	deadline := time.Now().Add(adoptBusyWait)
	for km.ExecutionState == "busy" && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if km, err = k.client.Kernel(ctx, k.id); err != nil {
			return fmt.Errorf("kernel %s: %w", k.id, err)
		}
	}
	return nil
}

// checkRestarted finds out whether the adopted kernel k is the interpreter the
// session's calls ran in: one that died between calls while kernelbox was down was
// restarted by its server under the same id, and answers as alive, empty. Its
// next execution count tells (counts only grow in one interpreter): not past the
// last reply's, the session's state is told lost, and a checkpoint (if any) is
// restored before the next call. Bounded; a kernel that does not answer is left
// to the call (which finds it as before).
func (s *session) checkRestarted(ctx context.Context, k *kernel) {
	s.mu.Lock()
	last := s.state.ExecutionCount
	s.mu.Unlock()
	if last <= 0 {
		return
	}
	k.count = last // the backstop of checkCount too
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	next, err := nextExecutionCount(cctx, k.conn)
	if err != nil || next > last {
		return
	}
	s.markLost(fmt.Sprintf("kernelbox restarted and found the session's kernel restarted by its server meanwhile (it died while kernelbox was not running: its execution count went from %d back to %d)%s",
		last, next-1, stateGone))
	if s.ckpt.last != nil {
		s.ckpt.restore = true
	}
	k.count = 0
}

// nextExecutionCount asks the kernel, silently, for the execution count its next
// stored call will get.
func nextExecutionCount(ctx context.Context, conn *jupyter.Conn) (int, error) {
	const key = "kernelbox_count"
	ex, err := conn.Execute(ctx, jupyter.ExecuteRequest{Code: "pass", Silent: true,
		UserExpressions: map[string]string{key: "get_ipython().execution_count"}})
	if err != nil {
		return 0, err
	}
	defer ex.Close()
	for {
		if _, err := ex.Next(ctx); err == io.EOF {
			break
		} else if err != nil {
			return 0, err
		}
	}
	reply, err := ex.Reply()
	if err != nil {
		return 0, err
	}
	var v struct {
		Status string            `json:"status"`
		Data   map[string]string `json:"data"`
	}
	if err := json.Unmarshal(reply.UserExpressions[key], &v); err != nil || v.Status != "ok" {
		return 0, fmt.Errorf("the kernel did not say its execution count")
	}
	return strconv.Atoi(v.Data["text/plain"])
}
