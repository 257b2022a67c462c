package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/jupyter"
)

// CheckpointAfterCall is the Template.Checkpoint value that saves a session's
// namespace after each call that left it whole, so that a kernel that dies or is
// replaced comes back with it (see Template.Checkpoint).
const CheckpointAfterCall = "after_call"

// CheckpointFile is the name of a session's last checkpoint in its directory. Like
// SnapshotFile, the kernel writes it beside its final name and renames it.
const CheckpointFile = ".kernelbox-checkpoint"

// CheckCheckpoint checks a checkpoint setting: "", "off" or CheckpointAfterCall.
func CheckCheckpoint(v string) error {
	switch v {
	case "", "off", CheckpointAfterCall:
		return nil
	}
	return fmt.Errorf("checkpoint: %q is not a setting (want %q or \"off\")", v, CheckpointAfterCall)
}

// checkpoint is the session's last checkpoint on disk. Owned by the worker.
type checkpoint struct {
	afterCall int // the session's call count when it was taken
	info      api.SnapshotInfo
}

// checkpointState is a session's checkpointing: the last checkpoint, whether the
// next call must restore it, and what the next result must be told. Owned by the
// worker.
type checkpointState struct {
	last      *checkpoint
	lastWhole int  // the session's last call that left the namespace whole
	restore   bool // the previous call lost the kernel's state: the next one restores
	// lostInCall: the call that just ended lost the kernel's state (a death, a
	// restart after an ignored interrupt); set by execute.
	lostInCall bool
	note       string // for the next result: a checkpoint not taken, and why
	disabled   string // why this session is never checkpointed (told once)
}

// kernelFilePath is where the session's kernel sees name in the session directory.
func (s *session) kernelFilePath(name string) (string, error) {
	p, err := s.kernelSnapshotPath()
	if err != nil {
		return "", err
	}
	return path.Join(path.Dir(p), name), nil
}

// afterCall runs on the worker once a call's result is delivered: it saves the
// namespace when the template checkpoints and the call left the namespace whole
// (ok or an error the code raised; not a timeout that restarted the kernel, nor a
// death). It runs before the session's next job, which waits for it, bounded by
// Options.CheckpointTimeout.
func (s *session) afterCall(r *api.Result) {
	if s.tmpl.Checkpoint != CheckpointAfterCall || r == nil || s.ckpt.disabled != "" || s.ctx.Err() != nil {
		return
	}
	if s.ckpt.lostInCall {
		s.ckpt.restore = s.ckpt.last != nil
		return
	}
	call := s.ckpt.lastWhole // this call's number, set by noteWhole
	if s.k == nil || !s.k.alive() {
		return
	}
	if _, err := s.kernelFilePath(CheckpointFile); err != nil {
		s.ckpt.disabled = err.Error()
		s.ckpt.note = "checkpoints are off for this session: " + err.Error()
		return
	}
	info, err := s.saveSnapshotTo(s.ctx, CheckpointFile, s.e.opts.CheckpointTimeout, "the checkpoint timeout", snapMeta{AfterCall: call})
	switch {
	case err == nil:
		s.ckpt.last = &checkpoint{afterCall: call, info: *info}
		s.ckpt.note = ""
		s.mu.Lock()
		s.state.Checkpoint = &api.CheckpointInfo{AfterCall: call, SnapshotInfo: *info}
		s.mu.Unlock()
		s.e.stateChanged() // a restart of kernelbox keeps it (keepstate.go)
	default:
		why := strings.TrimPrefix(err.Error(), api.ErrCannotHibernate.Error()+": ")
		s.ckpt.note = fmt.Sprintf("the checkpoint after call %d was not taken (%s)", call, why)
		if s.ckpt.last != nil {
			s.ckpt.note += fmt.Sprintf("; a kernel death would restore the one taken after call %d", s.ckpt.last.afterCall)
		}
	}
	if err != nil {
		s.log.Warn("checkpoint not taken", "err", err)
	}
}

// restoreCheckpoint loads the last checkpoint into the session's new kernel when
// the state was lost (lost, with why, or the previous call lost it) and the session
// has one. It reports whether the result still loses state (calls after the
// checkpoint), and the notes to add. Run before the call's code.
func (s *session) restoreCheckpoint(ctx context.Context, lost bool, why string, f *callFacts) (stillLost bool, lostWhy string) {
	want := lost || s.ckpt.restore
	s.ckpt.restore = false
	c := s.ckpt.last
	if !want || c == nil || s.k == nil {
		return lost, why
	}
	p, err := s.kernelFilePath(CheckpointFile)
	if err != nil {
		return lost, why
	}
	ctx, cancel := context.WithTimeout(ctx, s.e.opts.RestoreTimeout)
	defer cancel()
	t0 := time.Now()
	r, err := s.runSnapshot(ctx, fmt.Sprintf("_kb_load(%s)", pyStr(p)))
	took := time.Since(t0)
	switch {
	case err != nil:
		return true, why + "; the checkpoint taken after call " + fmt.Sprint(c.afterCall) + " could not be restored (" + err.Error() + ")"
	case r.Lost != "":
		s.ckpt.last = nil
		s.mu.Lock()
		s.state.Checkpoint = nil
		s.mu.Unlock()
		return true, why + "; the checkpoint taken after call " + fmt.Sprint(c.afterCall) + " could not be restored: " + r.Lost
	}
	snapObserver(s.e.opts.Observer).SnapshotRestored(took)
	// A kernel restarted in place counts its executions from 1 again: not a
	// replacement the next result must report.
	s.k.count = 0
	// The call the state is from is the one the loaded file names: the record
	// may lag behind a checkpoint renamed just before a kill, or the reverse.
	after := c.afterCall
	if r.Meta != nil && r.Meta.AfterCall > 0 {
		after = r.Meta.AfterCall
		c = &checkpoint{afterCall: after, info: c.info}
		s.ckpt.last = c
	}
	f.restored = &api.StateRestored{From: "checkpoint", AfterCall: after, Taken: c.info.Taken,
		Restored: nonNil(r.Restored), NotRestored: r.NotRestored, ByDesign: r.ByDesign, Bytes: r.Bytes, TookMS: took.Milliseconds()}
	note := "the kernel was replaced"
	if why != "" {
		note += " (" + why + ")"
	}
	f.notes = append(f.notes, note+"; "+restoredNote(f.restored))
	if c.afterCall < s.ckpt.lastWhole {
		return true, fmt.Sprintf("the state was restored from the checkpoint taken after call %d; what calls %d to %d changed is lost (their checkpoints were not taken)",
			c.afterCall, c.afterCall+1, s.ckpt.lastWhole)
	}
	return false, ""
}

// dropCheckpoint forgets the session's checkpoint and deletes its file: a reset
// asks for a fresh interpreter, and a closed session's checkpoint must not come
// back.
func (s *session) dropCheckpoint(dir string) {
	s.ckpt = checkpointState{disabled: s.ckpt.disabled}
	s.mu.Lock()
	s.state.Checkpoint = nil
	s.mu.Unlock()
	if dir == "" {
		return
	}
	if err := os.Remove(filepath.Join(dir, CheckpointFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("removing the session's checkpoint", "err", err)
	}
}

// stopSave interrupts a checkpoint's save that outlived its time in the kernel (the
// kernel removes its partial file), waits for the kernel to be done with it (a
// silent no-op queued behind it, bounded), and drops what the save printed, so that
// the next call neither waits behind it nor reports its output as stray.
func (s *session) stopSave() {
	ictx, icancel := context.WithTimeout(s.ctx, interruptBound)
	err := s.k.client.Interrupt(ictx, s.k.id)
	icancel()
	if err != nil {
		return
	}
	wctx, wcancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer wcancel()
	ex, err := s.k.conn.Execute(wctx, jupyter.ExecuteRequest{Code: "pass", Silent: true})
	if err != nil {
		return
	}
	defer ex.Close()
	for {
		if _, err := ex.Next(wctx); err != nil {
			break
		}
	}
	s.k.conn.TakeStray()
}
