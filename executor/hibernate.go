package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
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
	return s.saveSnapshotTo(ctx, SnapshotFile, s.e.opts.SnapshotTimeout, "the snapshot timeout")
}

// saveSnapshotTo writes the session's namespace to the file name in its directory
// (SnapshotFile, CheckpointFile), as saveSnapshot does, within timeout (bound names
// it in the error).
func (s *session) saveSnapshotTo(ctx context.Context, name string, timeout time.Duration, bound string) (*api.SnapshotInfo, error) {
	p, err := s.kernelFilePath(name)
	if err != nil {
		return nil, err
	}
	if !s.k.alive() {
		return nil, fmt.Errorf("%w: session %q's kernel is not alive", ErrCannotHibernate, s.id)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t0 := time.Now()
	limit := s.e.snapshotLimit()
	r, err := runSnapshot(ctx, s.k.conn, fmt.Sprintf("_kb_save(%s, %d)", pyStr(p), limit))
	took := time.Since(t0)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("%w: saving the namespace took over %s (%s): %w", ErrCannotHibernate, timeout, bound, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrCannotHibernate, err)
	case r.TooBig:
		var big []string
		for _, l := range r.Largest {
			big = append(big, fmt.Sprintf("%v (%v bytes)", l[0], l[1]))
		}
		return nil, fmt.Errorf("%w: session %q's namespace passed %d bytes, its snapshot limit (the disk quota or the server's snapshot limit), at %q; largest: %s; nothing was saved, the session stays live",
			ErrSnapshotTooLarge, s.id, limit, r.Name, strings.Join(big, ", "))
	case r.NoSpace:
		return nil, fmt.Errorf("%w: %s (the session's disk is full: its quota); nothing was saved, the session stays live", ErrSnapshotTooLarge, r.Error)
	case r.Error != "":
		return nil, fmt.Errorf("%w: %s", ErrCannotHibernate, r.Error)
	case !r.OK:
		return nil, fmt.Errorf("%w: the snapshot code reported no outcome", ErrCannotHibernate)
	}
	snapObserver(s.e.opts.Observer).SnapshotTaken(r.Bytes, took)
	return &api.SnapshotInfo{Bytes: r.Bytes, Names: nonNil(r.Names), Modules: r.Modules, Skipped: r.Skipped,
		Taken: time.Now(), TookMS: took.Milliseconds()}, nil
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
		return nil, fmt.Errorf("%w: session %q's kernel died; its next call starts a fresh one", ErrCannotHibernate, s.id)
	}
	info, err := s.saveSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	s.log.Info("hibernating session", "snapshot_bytes", info.Bytes, "names", len(info.Names), "took", time.Duration(info.TookMS)*time.Millisecond)
	if err := s.k.shutdown(ctx, s.e.opts.ShutdownTimeout); err != nil {
		s.log.Warn("hibernate: shutting down the kernel", "err", err)
	}
	s.setKernel(nil)
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

// restore loads the session's snapshot into its new kernel, s.k, and records what
// came back for the next result (or says the state is lost, and why). It runs in
// ensureKernel, right after the kernel started.
func (s *session) restore(ctx context.Context) {
	sl := s.sleep
	s.sleep = nil
	if s.asleep.Swap(false) {
		snapObserver(s.e.opts.Observer).Hibernated(-1)
	}
	s.mu.Lock()
	s.state.Snapshot, s.state.Hibernated = nil, time.Time{}
	s.mu.Unlock()
	p, err := s.kernelSnapshotPath()
	if err != nil {
		s.markLost("the session's snapshot could not be restored: " + err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.e.opts.SnapshotTimeout)
	defer cancel()
	t0 := time.Now()
	r, err := runSnapshot(ctx, s.k.conn, fmt.Sprintf("_kb_load(%s)", pyStr(p)))
	took := time.Since(t0)
	hostFile := filepath.Join(s.ws.Dir(), SnapshotFile)
	switch {
	case err != nil:
		// A load that killed the kernel (a pickle bomb past its memory limit)
		// is not tried again: the next call finds the dead kernel.
		s.markLost("the session's snapshot could not be restored (" + err.Error() + "); the kernel starts empty")
	case r.Lost != "":
		s.markLost("the session's snapshot could not be restored: " + r.Lost + "; the kernel starts empty")
	default:
		snapObserver(s.e.opts.Observer).SnapshotRestored(took)
		s.restored = &api.StateRestored{From: sl.from, Restored: nonNil(r.Restored), NotRestored: r.NotRestored,
			Bytes: r.Bytes, TookMS: took.Milliseconds()}
	}
	// A snapshot is restored once: a later kernel of the session must not load
	// an old namespace over a newer one.
	if err := os.Remove(hostFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("removing the restored snapshot", "err", err)
	}
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
