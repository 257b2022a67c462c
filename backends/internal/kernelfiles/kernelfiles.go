// Package kernelfiles is the part of a placement whose session files live in its
// kernel, not on kernelbox's host (the remote and swarm backends): it moves inputs
// and outputs through the kernel with a kernelfs.Syncer (executor.FileSyncer),
// serves the session files API there (its KernelFiles), and stops both once
// the placement's server is gone for good, closing Lost (executor.LossReporter).
//
// A backend's Placement embeds a [*Files] made by [New] and keeps the [Loss] it
// gave it to itself: the placement decides when its server is lost; the files
// only obey.
package kernelfiles

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/kernelfs"
)

// Loss records that a placement's server has gone for good: a remote gateway that
// left the rotation, a swarm task that ended or whose node went down. The zero
// value is a placement not lost; it is safe for concurrent use.
type Loss struct {
	mu   sync.Mutex
	why  string
	done chan struct{}
}

// Lose records why the server is gone and closes the channel Done returns. Only
// the first call counts: it reports whether it was the one.
func (l *Loss) Lose(why string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.why != "" {
		return false
	}
	if why == "" {
		why = "the session's server is gone"
	}
	l.why = why
	close(l.ch())
	return true
}

// Reason says why the server is gone, or "" while it is not.
func (l *Loss) Reason() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.why
}

// Done returns a channel closed by the first Lose.
func (l *Loss) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ch()
}

// ch returns the channel, made on first use; l.mu is held.
func (l *Loss) ch() chan struct{} {
	if l.done == nil {
		l.done = make(chan struct{})
	}
	return l.done
}

// Files moves a session's files through its kernel. The executor calls
// PushInputs, OutputsProbe, PullOutputs and KernelFiles from the session's
// worker, one at a time; Lost and KernelID are safe for concurrent use. The
// connection is lent to each call and never kept.
type Files struct {
	sync   *kernelfs.Syncer // owned by the session's worker
	budget int64
	loss   *Loss

	mu       sync.Mutex
	kernelID string // the kernel the last call reached
}

var (
	_ executor.FileSyncer   = (*Files)(nil)
	_ executor.LossReporter = (*Files)(nil)
)

// New returns the files of one placement, synced with a kernelfs.Syncer made
// from o. budget is the session's byte budget for the files API when the
// workspace gives none (no disk quota); 0 leaves it to o.MaxSessionBytes. Once
// loss is lost, every call fails with its reason.
func New(o kernelfs.Options, budget int64, loss *Loss) *Files {
	return &Files{sync: kernelfs.New(o), budget: budget, loss: loss}
}

// reach records the kernel a call reaches, or fails with the reason the
// placement's server is gone: the executor is moving the session.
func (f *Files) reach(conn *jupyter.Conn) error {
	if why := f.loss.Reason(); why != "" {
		return errors.New(why)
	}
	f.mu.Lock()
	f.kernelID = conn.KernelID()
	f.mu.Unlock()
	return nil
}

// KernelID returns the id of the kernel the last call reached, "" before one did.
func (f *Files) KernelID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.kernelID
}

// Dir returns the session's directory in the kernel, "" until a call set it up.
// It is used from the session's worker, like the calls that set it.
func (f *Files) Dir() string { return f.sync.Dir() }

// Resume continues the session directory dir that an earlier Files set up in the
// same kernel (kernelfs.Syncer.Resume): a placement taken back after a restart of
// kernelbox. Call it before the first call.
func (f *Files) Resume(dir string) { f.sync.Resume(dir) }

// PushInputs copies the named files of hostDir/inputs to the kernel's inputs/
// (kernelfs.Syncer.PushInputs).
func (f *Files) PushInputs(ctx context.Context, conn *jupyter.Conn, hostDir string, names []string) error {
	if err := f.reach(conn); err != nil {
		return err
	}
	return f.sync.PushInputs(ctx, conn, hostDir, names)
}

// OutputsProbe returns the expression that tells whether the kernel's outputs/
// changed (kernelfs.Syncer.OutputsProbe).
func (f *Files) OutputsProbe() string { return f.sync.OutputsProbe() }

// PullOutputs copies the new or changed files of the kernel's outputs/ into
// hostDir/outputs/ (kernelfs.Syncer.PullOutputs).
func (f *Files) PullOutputs(ctx context.Context, conn *jupyter.Conn, hostDir string, probe json.RawMessage) error {
	if err := f.reach(conn); err != nil {
		return err
	}
	return f.sync.PullOutputs(ctx, conn, hostDir, probe)
}

// KernelFiles returns the session's files in its kernel's directory, through
// conn (kernelfs.Files): uploads, downloads, listings and deletes go through the
// kernel in chunks, with the workspace's per-file limit and the session's byte
// budget (the workspace's disk quota when one is set, else New's budget), since
// the kernel's disk has no quota of kernelbox's.
func (f *Files) KernelFiles(conn *jupyter.Conn, l executor.FileLimits) (executor.SessionFiles, error) {
	if err := f.reach(conn); err != nil {
		return nil, err
	}
	return f.sync.Files(conn, f.limits(l)), nil
}

// limits are the kernelfs limits of the files API under the workspace's l.
func (f *Files) limits(l executor.FileLimits) kernelfs.Limits {
	if l.MaxSessionBytes <= 0 {
		l.MaxSessionBytes = f.budget
	}
	return kernelfs.Limits{MaxFileBytes: l.MaxFileBytes, MaxSessionBytes: l.MaxSessionBytes}
}

// Lost returns a channel closed when the placement's server is gone for good
// (executor.LossReporter): the session then moves to a new placement.
func (f *Files) Lost() <-chan struct{} { return f.loss.Done() }
