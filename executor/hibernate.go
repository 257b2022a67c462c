package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/jupyter"
)

// sleepState is a session's saved namespace while it has no kernel: set by
// hibernate (or a fork's copy), taken by the restore of the next kernel. Owned by
// the session's worker.
type sleepState struct {
	info api.SnapshotInfo
	from string // "hibernation" or "fork:<id>"
}

// snapshotLimit is the largest snapshot a session may keep.
func (e *Executor) snapshotLimit() int64 {
	if e.opts.SnapshotMaxBytes > 0 {
		return e.opts.SnapshotMaxBytes
	}
	if q, _ := e.opts.Workspace.DiskQuota(); q > 0 {
		return q
	}
	return 8 << 30
}

// saveSnapshot writes the session's namespace to its snapshot file, in the kernel.
// The kernel keeps running. On any error no snapshot is kept under the final name
// beyond one written earlier.
func (s *session) saveSnapshot(ctx context.Context) (*api.SnapshotInfo, error) {
	return s.saveSnapshotTo(ctx, SnapshotFile, s.e.opts.SnapshotTimeout, "the snapshot timeout", snapMeta{})
}

// saveSnapshotTo writes the session's namespace to the file name in its directory
// (SnapshotFile, CheckpointFile), as saveSnapshot does, within timeout (bound names
// it in the error) and ctx, keeping meta in the file. A save that does not finish
// in time (a __getstate__ that blocks) is interrupted in the kernel, and its
// temporary file removed, before the error returns: the session's next job never
// waits behind it, and no half file stays to hold disk.
func (s *session) saveSnapshotTo(ctx context.Context, name string, timeout time.Duration, bound string, meta snapMeta) (*api.SnapshotInfo, error) {
	p, err := s.kernelFilePath(name)
	if err != nil {
		return nil, err
	}
	if !s.k.alive() {
		return nil, fmt.Errorf("%w: session %q's kernel is not alive", api.ErrCannotHibernate, s.id)
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t0 := time.Now()
	limit := s.e.snapshotLimit()
	r, err := s.runSnapshot(sctx, fmt.Sprintf("_kb_save(%s, %d, %s)", pyStr(p), limit, pyMeta(meta)))
	took := time.Since(t0)
	if err != nil || r == nil || !r.OK {
		s.sweepSaves(name)
	}
	switch {
	case err != nil && sctx.Err() != nil:
		if s.ctx.Err() == nil {
			s.stopSave()
		}
		s.sweepSaves(name)
		limitWhy := fmt.Sprintf("over %s (%s)", timeout.Round(time.Millisecond), bound)
		if ctx.Err() != nil {
			limitWhy = "past the time the operation had (" + context.Cause(ctx).Error() + ")"
		}
		return nil, fmt.Errorf("%w: saving the namespace was stopped after %s, %s; the kernel was interrupted and keeps its namespace",
			api.ErrCannotHibernate, took.Round(time.Millisecond), limitWhy)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", api.ErrCannotHibernate, err)
	case r.TooBig:
		var big []string
		for _, l := range r.Largest {
			big = append(big, fmt.Sprintf("%v (%v bytes)", l[0], l[1]))
		}
		return nil, fmt.Errorf("%w: session %q's namespace passed %d bytes, its snapshot limit (the disk quota or the server's snapshot limit), at %q; largest: %s; nothing was saved, the session stays live",
			api.ErrSnapshotTooLarge, s.id, limit, r.Name, strings.Join(big, ", "))
	case r.NoSpace:
		return nil, fmt.Errorf("%w: %s (the session's disk is full: its quota); nothing was saved, the session stays live", api.ErrSnapshotTooLarge, r.Error)
	case r.Error != "":
		return nil, fmt.Errorf("%w: %s", api.ErrCannotHibernate, r.Error)
	case !r.OK:
		return nil, fmt.Errorf("%w: the snapshot code reported no outcome", api.ErrCannotHibernate)
	}
	snapObserver(s.e.opts.Observer).SnapshotTaken(r.Bytes, took)
	return &api.SnapshotInfo{Bytes: r.Bytes, Names: nonNil(r.Names), Modules: r.Modules, Skipped: r.Skipped,
		Taken: time.Now(), TookMS: took.Milliseconds()}, nil
}

// sweepSaves removes, from the host's side, the temporary files of saves of name
// in the session's directory (name.tmp-PID): a save that failed or was stopped
// leaves none behind to hold disk against the quota until the next save. It runs
// only when the kernel is not saving (after its save answered or was interrupted):
// should a save still be writing, the file it writes is unlinked under it, and its
// final rename fails, so no late half file can take the final name.
func (s *session) sweepSaves(name string) {
	if s.ws == nil {
		return
	}
	sweepTemps(s.ws.Dir(), name, s.log)
}

// sweepTemps removes dir/name.tmp-* (never following a link: a link is removed
// itself).
func sweepTemps(dir, name string, log *slog.Logger) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, d := range ents {
		if strings.HasPrefix(d.Name(), name+".tmp-") {
			if err := os.Remove(filepath.Join(dir, d.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				log.Warn("removing a snapshot's temporary file", "file", d.Name(), "err", err)
			}
		}
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// hibernate saves the namespace, then stops the kernel (and its container) and
// closes the session directory: the session keeps its id, files and queue, and its
// next call restores the namespace in a new kernel. A session that cannot be saved
// whole stays live, and the error says why. Hibernating a hibernated session
// returns its snapshot.
func (s *session) hibernate(ctx context.Context) (*api.SnapshotInfo, error) {
	if s.sleep != nil {
		info := s.sleep.info
		return &info, nil
	}
	if s.k != nil && !s.k.alive() {
		return nil, fmt.Errorf("%w: session %q's kernel died; its next call starts a fresh one", api.ErrCannotHibernate, s.id)
	}
	info, err := s.saveSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	if !s.e.commitHibernation(s, info) {
		if s.ws != nil {
			if err := os.Remove(filepath.Join(s.ws.Dir(), SnapshotFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
				s.log.Warn("removing a snapshot saved after the stop began", "err", err)
			}
		}
		return nil, fmt.Errorf("%w: kernelbox began stopping while session %q's namespace was being saved, and its sessions were already listed for the next start: the session is kept as a live one is (--on-stop %s), not hibernated",
			api.ErrCannotHibernate, s.id, s.e.opts.OnClose)
	}
	s.log.Info("hibernating session", "snapshot_bytes", info.Bytes, "names", len(info.Names), "took", time.Duration(info.TookMS)*time.Millisecond)
	if err := s.k.shutdown(ctx, s.e.opts.ShutdownTimeout); err != nil {
		s.log.Warn("hibernate: shutting down the kernel", "err", err)
	}
	s.setKernel(nil)
	// Pinned before it closes: a closed directory past --max-kept-sessions
	// would otherwise be deleted, snapshot and all.
	s.e.opts.Workspace.Pin(s.id)
	if s.ws != nil {
		_ = s.ws.Close()
		s.ws = nil
	}
	s.sleep = &sleepState{info: *info, from: "hibernation"}
	s.asleep.Store(true)
	snapObserver(s.e.opts.Observer).Hibernated(1)
	s.mu.Lock()
	s.state.State = api.StateHibernated
	s.state.Snapshot = info
	s.state.Hibernated = time.Now()
	s.mu.Unlock()
	s.e.stateChanged()
	return info, nil
}

// hibernateCapped hibernates the session as hibernate does, unless the server
// already keeps Options.MaxHibernated hibernated sessions: then it is refused and
// the session stays live. A stop with StopHibernate is not capped (it is the
// operator's choice for every session, bounded by the sessions there are).
func (s *session) hibernateCapped(ctx context.Context) (*api.SnapshotInfo, error) {
	if s.sleep == nil {
		if n := s.e.hibernatedCount(); n >= s.e.opts.MaxHibernated {
			return nil, fmt.Errorf("%w: the server keeps at most %d hibernated sessions (--max-hibernated) and has %d; none is deleted to make room: close or resume one",
				api.ErrCannotHibernate, s.e.opts.MaxHibernated, n)
		}
	}
	return s.hibernate(ctx)
}

// restore loads the session's snapshot into its new kernel, s.k, and records what
// came back for the next result (or says the state is lost, and why). It runs in
// ensureKernel, right after the kernel started. Until the load has succeeded the
// kept state still lists the snapshot beside the new kernel, so a kernelbox killed
// in the middle takes the session back hibernated, never the half-loaded kernel as
// whole; the snapshot file is removed only once the state without it is on disk.
// A kernel that dies or runs out of time while loading (an OOM under a smaller
// memory limit) leaves the session hibernated with its snapshot, and the error
// (api.ErrCannotResume) says why and how to recover.
func (s *session) restore(ctx context.Context) error {
	sl := s.sleep
	p, err := s.kernelSnapshotPath()
	if err != nil {
		s.wake()
		s.markLost("the session's snapshot could not be restored: " + err.Error())
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.e.opts.RestoreTimeout)
	defer cancel()
	t0 := time.Now()
	r, err := s.runSnapshot(ctx, fmt.Sprintf("_kb_load(%s)", pyStr(p)))
	took := time.Since(t0)
	hostFile := filepath.Join(s.ws.Dir(), SnapshotFile)
	switch {
	case err != nil:
		// The kernel died (a pickle bomb or a namespace past its memory limit)
		// or the load ran out of time: not tried again now, and the snapshot
		// stays for a resume once the cause is mended.
		return s.backToSleep(ctx, err, took)
	case r.Lost != "":
		s.wake()
		s.markLost("the session's snapshot could not be restored: " + r.Lost + "; the kernel starts empty")
	default:
		s.wake()
		snapObserver(s.e.opts.Observer).SnapshotRestored(took)
		s.restored = &api.StateRestored{From: sl.from, Restored: nonNil(r.Restored), NotRestored: r.NotRestored,
			ByDesign: r.ByDesign, Bytes: r.Bytes, TookMS: took.Milliseconds()}
	}
	// A snapshot is restored once: a later kernel of the session must not load
	// an old namespace over a newer one. The state that no longer lists it is
	// written first, so that a kill between the two finds the file unlisted, not
	// listed and gone.
	s.e.flushState()
	if err := os.Remove(hostFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("removing the restored snapshot", "err", err)
	}
	return nil
}

// wake records that the session's snapshot has been dealt with (loaded, or found
// unusable): the session is live again.
func (s *session) wake() {
	s.sleep = nil
	if s.asleep.Swap(false) {
		snapObserver(s.e.opts.Observer).Hibernated(-1)
	}
	s.waking.Store(false)
	s.e.opts.Workspace.Unpin(s.id)
	s.mu.Lock()
	s.state.Snapshot, s.state.Hibernated = nil, time.Time{}
	s.mu.Unlock()
}

// discardSnapshot forgets a hibernated session's snapshot and deletes its file (a
// reset asks for a fresh interpreter): the session is live again, without a
// kernel until its next call.
func (s *session) discardSnapshot() {
	dir := filepath.Join(s.e.opts.Workspace.Root(), "sessions", s.id)
	if s.ws != nil {
		dir = s.ws.Dir()
	} else if ws, err := s.e.opts.Workspace.Open(s.id); err == nil { // mounts its disk
		defer ws.Close()
		dir = ws.Dir()
	}
	if err := os.Remove(filepath.Join(dir, SnapshotFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("removing the discarded snapshot", "err", err)
	}
	s.wake()
	s.setState(api.StateNew)
	s.e.stateChanged()
}

// backToSleep puts a session whose snapshot could not be loaded (its kernel died
// or ran out of time: err) back to hibernation: the new kernel is stopped, the
// snapshot kept, and the error says why, naming an OOM, and how to recover.
func (s *session) backToSleep(ctx context.Context, err error, took time.Duration) error {
	why := err.Error()
	hint := "give its template more memory (or time) and resume it, or reset or close the session to discard it"
	switch {
	case errors.Is(err, errSnapInterrupted), errors.Is(err, jupyter.ErrReplyLost):
		why, hint = "its load was interrupted", "resume it (or call it) again"
		if s.e.stopping() {
			why += " (kernelbox is stopping)"
		}
	case ctx.Err() != nil && s.ctx.Err() == nil:
		why = fmt.Sprintf("loading it took over %s (the restore timeout)", s.e.opts.RestoreTimeout)
	default:
		// Bounded: a placement that does not answer must not hold this up.
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), diagnoseWait)
		cause := s.k.diagnose(dctx)
		dcancel()
		if cause == "" {
			cause = "no cause known (most often the memory limit"
			if s.tmpl.Memory > 0 {
				cause += ", " + formatMiB(s.tmpl.Memory) + " for this template"
			}
			cause += ")"
		}
		why = "the kernel died while loading it: " + cause
	}
	s.log.Warn("the snapshot could not be restored; the session stays hibernated", "err", why, "took", took)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.e.opts.ShutdownTimeout)
	defer cancel()
	if err := s.k.shutdown(sctx, s.e.opts.ShutdownTimeout); err != nil {
		s.log.Warn("stopping the kernel that could not restore the snapshot", "err", err)
	}
	s.setKernel(nil)
	if s.ws != nil {
		_ = s.ws.Close()
		s.ws = nil
	}
	s.waking.Store(false)
	if !s.asleep.Swap(true) {
		snapObserver(s.e.opts.Observer).Hibernated(1)
	}
	s.mu.Lock()
	s.state.State, s.state.Snapshot = api.StateHibernated, &s.sleep.info
	s.mu.Unlock()
	s.e.stateChanged()
	return fmt.Errorf("%w: session %q's snapshot (%d bytes) could not be loaded: %s; it is kept and the session stays hibernated: %s",
		api.ErrCannotResume, s.id, s.sleep.info.Bytes, why, hint)
}

// restoredNote sums up a restore for a result's notes.
func restoredNote(r *api.StateRestored) string {
	from := r.From
	if r.From == "checkpoint" {
		from = fmt.Sprintf("the checkpoint taken after call %d", r.AfterCall)
	}
	msg := fmt.Sprintf("state restored from %s: %d names (%d bytes, %d ms)", from, len(r.Restored), r.Bytes, r.TookMS)
	if len(r.NotRestored) > 0 {
		names := make([]string, 0, len(r.NotRestored))
		for n, why := range r.NotRestored {
			names = append(names, n+" ("+why+")")
		}
		sort.Strings(names)
		msg += "; not restored: " + strings.Join(names, "; ")
	}
	return msg
}

// takeRestored returns and clears the pending restore report.
func (s *session) takeRestored() *api.StateRestored {
	r := s.restored
	s.restored = nil
	return r
}
