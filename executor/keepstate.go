package executor

// The executor's kept state (Options.StateDir, issue 34 item 1): sessions.json
// lists each session's id, template, kernel id and created time, and the snapshot
// of a hibernated one. It is rewritten whole, through a temporary file that is
// fsynced and renamed (0600), by one writer goroutine each time a session gets or
// loses a kernel, hibernates or ends, so that a SIGKILL at any moment leaves the old
// list or the new one. adopt.go reads it back.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/statefile"
)

// StopPolicy is what Executor.Close does with the live sessions.
type StopPolicy string

// The stop policies.
const (
	// StopClose stops every kernel (and container); the sessions' files stay.
	StopClose StopPolicy = "close"
	// StopKeep leaves the kernels running, listed in Options.StateDir, for the
	// next executor with the same StateDir to adopt; it needs a Reattacher
	// backend (else it is StopClose).
	StopKeep StopPolicy = "keep"
	// StopHibernate hibernates each session that can be (its snapshot kept in
	// its directory, listed in StateDir), then stops every kernel; the next
	// executor with the same StateDir lists them hibernated.
	StopHibernate StopPolicy = "hibernate"
)

// ParseStopPolicy returns the policy named s, or an error naming the choices.
func ParseStopPolicy(s string) (StopPolicy, error) {
	switch p := StopPolicy(s); p {
	case StopClose, StopKeep, StopHibernate:
		return p, nil
	}
	return "", fmt.Errorf("stop policy %q: want keep, hibernate or close", s)
}

// stateFileName is the executor's state file in Options.StateDir.
const stateFileName = "sessions.json"

// stateVersion is the state file's format version; another is refused.
const stateVersion = 1

// maxStateBytes bounds the state file read back.
const maxStateBytes = 16 << 20

// keptSessions is the state file.
type keptSessions struct {
	Version  int           `json:"version"`
	Sessions []keptSession `json:"sessions"`
}

// keptSession is one session in the state file.
type keptSession struct {
	ID             string            `json:"id"`
	Template       string            `json:"template"`
	KernelID       string            `json:"kernel_id,omitempty"`
	Created        time.Time         `json:"created"`
	Calls          int               `json:"calls,omitempty"`
	ExecutionCount int               `json:"execution_count,omitempty"`
	Snapshot       *api.SnapshotInfo `json:"snapshot,omitempty"`
	// Checkpoint is the session's last after-call checkpoint (its file is in the
	// session directory): a kernel that does not survive the restart is restored
	// from it.
	Checkpoint *api.CheckpointInfo `json:"checkpoint,omitempty"`
	// Lost says why a session's state did not survive the stop (it could not
	// hibernate): the next executor tells its next call so.
	Lost string `json:"lost,omitempty"`
	// Whole is, for a session that checkpoints, its last call that left the
	// namespace whole and was acknowledged (wholelog.go): a checkpoint older
	// than it is restored as such, with the later calls' changes told lost.
	Whole int `json:"whole,omitempty"`
}

// keeper writes the state file: stateChanged asks, one goroutine writes.
type keeper struct {
	path   string
	dirty  chan struct{}
	mu     sync.Mutex // held while writing; guards frozen
	frozen bool       // Close wrote the last list

	// jmu guards the calls journal (wholelog.go), opened at first use. It is
	// not mu: a call's answer waits for its journal line, never for a state
	// file being written and fsynced. Taken before mu (compaction), never after.
	jmu        sync.Mutex
	whole      *os.File
	wholeBytes int64
}

// stateChanged tells the state writer to write the sessions again. It never
// blocks.
func (e *Executor) stateChanged() {
	if e.keep == nil {
		return
	}
	select {
	case e.keep.dirty <- struct{}{}:
	default:
	}
}

// keepLoop is the state writer goroutine; it ends with e.stop.
func (e *Executor) keepLoop() {
	defer e.wg.Done()
	for {
		select {
		case <-e.stop:
			return
		case <-e.keep.dirty:
			e.writeState(e.liveRecords())
		}
	}
}

// liveRecords returns the state file's records of the registered sessions.
func (e *Executor) liveRecords() []keptSession {
	list := e.sessionList()
	out := make([]keptSession, 0, len(list))
	for _, s := range list {
		if r, ok := s.record(); ok {
			out = append(out, r)
		}
	}
	return out
}

// record returns the session as the state file lists it: one with a kernel, or
// hibernated.
func (s *session) record() (keptSession, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := keptSession{ID: s.id, Template: s.tmpl.Name, Created: s.state.Created, Calls: s.state.Calls,
		ExecutionCount: s.state.ExecutionCount, Snapshot: s.state.Snapshot, Checkpoint: s.state.Checkpoint, Whole: s.whole}
	if s.kref != nil {
		r.KernelID = s.kref.id
	} else if s.adopting != "" {
		r.KernelID = s.adopting
	}
	return r, r.KernelID != "" || r.Snapshot != nil || r.Checkpoint != nil
}

// writeState writes recs as the state file, unless a stop has frozen it
// (freezeState).
func (e *Executor) writeState(recs []keptSession) {
	k := e.keep
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.frozen {
		return
	}
	e.writeStateLocked(recs)
}

// writeStateLocked writes recs as the state file; e.keep.mu is held.
func (e *Executor) writeStateLocked(recs []keptSession) {
	k := e.keep
	data, err := json.Marshal(keptSessions{Version: stateVersion, Sessions: recs})
	if err == nil {
		err = statefile.Write(k.path, data, true)
	}
	if err != nil {
		e.log.Error("write the sessions' state: the next start cannot adopt them", "file", k.path, "err", err)
	}
}

// stopping reports whether Close has begun.
func (e *Executor) stopping() bool {
	select {
	case <-e.stop:
		return true
	default:
		return false
	}
}

// flushState writes the state file now, on the caller's goroutine, when there is
// one: for a change that must be on disk before what follows it (a restored
// snapshot is removed only once the state no longer lists it).
func (e *Executor) flushState() {
	if e.keep != nil {
		e.writeState(e.liveRecords())
	}
}

// readState reads the state file at path. A missing file is an empty list.
func readState(path string) ([]keptSession, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read state file: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxStateBytes {
		return nil, fmt.Errorf("state file %s is not a regular file of at most %d bytes", path, maxStateBytes)
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil {
		return nil, fmt.Errorf("read state file: %w", err)
	}
	var st keptSessions
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("state file %s is corrupt: %w", path, err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("state file %s has format %d, this kernelbox reads %d", path, st.Version, stateVersion)
	}
	return st.Sessions, nil
}

// prepareStop applies Options.OnClose before Close stops the sessions in list,
// and writes the state file's last list. Whatever the policy, a hibernated
// session stays listed hibernated (its snapshot is in its directory) and a
// session with a checkpoint stays listed with it, so the next start restores it
// and says why (issue 46 item 2). With StopKeep the sessions with a kernel let go
// of it without stopping it; with StopHibernate each is hibernated first (bounded
// by ctx), and one that cannot be is recorded as lost with why. The state is
// frozen before the last list is taken: a hibernation whose save ends later is
// refused (commitHibernation), never answered and then left out. It reports
// whether the backend is to be detached rather than closed.
func (e *Executor) prepareStop(ctx context.Context, list []*session) (detach bool) {
	policy := e.opts.OnClose
	_, reattaches := e.opts.Backend.(Reattacher)
	if policy == StopKeep && !reattaches {
		e.log.Warn("stop policy keep needs a backend whose kernels outlive kernelbox; closing the sessions (hibernated and checkpointed ones stay listed)", "backend", e.Backend())
		policy = StopClose
	}
	if e.keep == nil {
		return false
	}
	var recs []keptSession
	if policy == StopHibernate {
		recs = e.hibernateAll(ctx, list)
		e.freezeState()
	} else {
		e.settleSaves(ctx, list)
		e.freezeState()
		recs = e.keptAtStop(list, policy)
	}
	e.writeFinalState(recs)
	live, asleep, ckpt, lost := 0, 0, 0, 0
	for _, r := range recs {
		switch {
		case r.Lost != "" && r.Checkpoint == nil:
			lost++
		case r.Snapshot != nil && r.KernelID == "":
			asleep++
		case r.KernelID != "":
			live++
		default:
			ckpt++
		}
	}
	e.log.Info("sessions kept for the next start", "policy", string(policy), "sessions", len(recs),
		"with_kernel", live, "hibernated", asleep, "from_checkpoint", ckpt, "lost", lost)
	return policy == StopKeep
}

// settleSaves waits for the checkpoints and hibernations being saved when the
// stop came (a checkpoint runs on its session's worker once its call's result
// is out), so that the stop keeps the checkpoint of the last call each session
// answered, and a hibernate asked before the stop ends answered and kept. It
// waits for nothing else (a running call ends with the stop) and at most half of
// what ctx leaves, the rest being the sessions' close; a hibernation still
// saving then is refused when its save ends (commitHibernation).
func (e *Executor) settleSaves(ctx context.Context, list []*session) {
	bound := e.opts.CheckpointTimeout
	if d, ok := ctx.Deadline(); ok {
		bound = min(bound, time.Until(d)/2)
	}
	deadline := time.Now().Add(bound)
	for _, s := range list {
		for s.saving() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// saving reports whether the session's worker saves its namespace now: an
// after-call checkpoint or a hibernation.
func (s *session) saving() bool {
	op := s.op.Load()
	return op != nil && (op == &opCheckpoint || *op == opHibernate)
}

// freezeState makes the state file's content final: Close's last list is written
// by writeFinalState; changes after it (sessions being torn down, a hibernation
// whose save ends late) are not written.
func (e *Executor) freezeState() {
	e.keep.mu.Lock()
	e.keep.frozen = true
	e.keep.mu.Unlock()
}

// writeFinalState writes recs, Close's last list, over a frozen state.
func (e *Executor) writeFinalState(recs []keptSession) {
	e.keep.mu.Lock()
	defer e.keep.mu.Unlock()
	e.writeStateLocked(recs)
}

// commitHibernation lists session s with its new snapshot, info, in its state
// and on disk while its kernel still runs, before the kernel is stopped: from
// then on a stop or a kill takes the session back hibernated (a record with a
// kernel and a snapshot is a hibernated one, adopt.go). It reports false, and
// changes nothing, when a stop has frozen the state already: its last list has
// the session as it was, so the hibernation must not go on (or its answer
// would be a session the next start does not have).
func (e *Executor) commitHibernation(s *session, info *api.SnapshotInfo) bool {
	if k := e.keep; k != nil {
		k.mu.Lock()
		if k.frozen {
			k.mu.Unlock()
			return false
		}
		s.mu.Lock()
		s.state.Snapshot = info
		s.mu.Unlock()
		k.mu.Unlock()
	}
	e.flushState()
	return true
}

// keptAtStop returns the records a stop with policy StopKeep or StopClose keeps:
// hibernated sessions as they are; with StopKeep the sessions with a kernel,
// which let go of it (detached); sessions with a checkpoint whose kernel stops,
// to be restored from it (their record says why); a session whose snapshot was
// still loading, hibernated again.
func (e *Executor) keptAtStop(list []*session, policy StopPolicy) []keptSession {
	var recs []keptSession
	for _, s := range list {
		r, ok := s.record()
		switch {
		case !ok:
			continue
		case r.Snapshot != nil && r.KernelID == "": // hibernated
		case policy == StopKeep && r.KernelID != "":
			s.detached.Store(true)
			e.opts.Workspace.KeepMounted(s.id)
		case r.Snapshot != nil: // its restore did not finish: hibernated still
			r.KernelID = ""
		case r.Checkpoint != nil:
			r.KernelID = ""
			r.Lost = fmt.Sprintf("kernelbox was stopped with --on-stop %s, which stops every kernel", policy) + stateGone
		default:
			continue
		}
		recs = append(recs, r)
	}
	return recs
}

// hibernateAll interrupts and hibernates every session in list, at once,
// bounded by ctx, and returns their records: hibernated, or lost with why.
func (e *Executor) hibernateAll(ctx context.Context, list []*session) []keptSession {
	var (
		mu   sync.Mutex
		recs []keptSession
		wg   sync.WaitGroup
	)
	for _, s := range list {
		wg.Go(func() {
			started := make(chan struct{})
			ictx, stopInterrupts := context.WithCancel(ctx)
			go s.interruptUntil(ictx, started)
			err := s.runFunc(ctx, opHibernate, func(s *session, _ *job) error {
				// Under intrMu: no interrupt of the stop's lands in its own save.
				s.intrMu.Lock()
				close(started)
				s.intrMu.Unlock()
				if s.k == nil && s.sleep == nil {
					return errNoKernel
				}
				_, err := s.hibernate(ctx)
				return err
			})
			stopInterrupts()
			r, ok := s.record()
			if errors.Is(err, errNoKernel) {
				return
			}
			if err != nil || !ok || r.Snapshot == nil {
				r = keptSession{ID: s.id, Template: s.tmpl.Name, Created: r.Created, Calls: r.Calls,
					Checkpoint: r.Checkpoint, Lost: fmt.Sprintf("kernelbox was stopped and the session could not hibernate (%v)", err) + stateGone}
			}
			mu.Lock()
			recs = append(recs, r)
			mu.Unlock()
		})
	}
	wg.Wait()
	return recs
}

// interruptUntil interrupts the session's running code (a call's, a snapshot's
// load) now and then every second until started is closed (the stop's own job
// began) or ctx ends: a call whose kernel was still starting at the first try (a
// resume, a cold start) is stopped once its code runs, instead of holding the
// stop until its bound. A session running no code is not interrupted (interrupt
// says why), and no interrupt is sent once started is closed.
func (s *session) interruptUntil(ctx context.Context, started <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		s.intrMu.Lock()
		select {
		case <-started:
			s.intrMu.Unlock()
			return
		default:
		}
		_ = s.interruptLocked(ctx)
		s.intrMu.Unlock()
		select {
		case <-started:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// errNoKernel: a session that never started a kernel has nothing to keep.
var errNoKernel = errors.New("no kernel")

// detach lets go of the session's kernel without stopping it (StopKeep): the
// connection is closed, the kernel and its placement keep running, and the
// session directory stays open (its disk mounted) for the next executor.
func (s *session) detach() {
	if s.k != nil {
		s.k.dropConn()
		if s.k.client != nil {
			s.k.client.CloseIdle()
		}
	}
	s.log.Info("session kept for the next start", "kernel_id", s.snapshot().KernelID)
}

// PinnedSessions returns the ids of the sessions the state file in dir lists
// without a running kernel but with state in their directories (a snapshot: a
// hibernated session; a checkpoint), whose directories the workspace must keep
// whatever its MaxKeptSessions says (workspace.Options.Pinned). A missing or
// unreadable file lists none.
func PinnedSessions(dir string) []string {
	recs, err := readState(filepath.Join(dir, stateFileName))
	if err != nil {
		return nil
	}
	var ids []string
	for _, r := range recs {
		if (r.Snapshot != nil || r.Checkpoint != nil) && api.ValidSessionID(r.ID) {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// KeptSessions returns the ids of the sessions whose kernels the state file in dir
// (an earlier executor's Options.StateDir) lists as running, so that the workspace
// keeps their disks mounted for their adoption (workspace.Options.KeepMounted). A
// missing or unreadable file lists none.
func KeptSessions(dir string) []string {
	recs, err := readState(filepath.Join(dir, stateFileName))
	if err != nil {
		return nil
	}
	var ids []string
	for _, r := range recs {
		if r.KernelID != "" && api.ValidSessionID(r.ID) {
			ids = append(ids, r.ID)
		}
	}
	return ids
}
