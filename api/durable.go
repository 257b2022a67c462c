package api

import (
	"errors"
	"time"
)

// StateHibernated: the session's kernel was stopped after its namespace was saved
// to a snapshot in the session's directory; its next call (or a resume) starts a
// kernel and restores the snapshot in it.
const StateHibernated SessionState = "hibernated"

// StateRestoring: a hibernated session's kernel is starting and loading its
// snapshot.
const StateRestoring SessionState = "restoring"

// ErrCannotHibernate: the session cannot be hibernated (or forked): its kernel is
// not Python (R sessions do not hibernate), its backend keeps the kernel's files
// away from the session directory (remote, swarm), its namespace could not be
// written whole, or it has never started a kernel. Nothing was stopped: the
// session stays as it was.
var ErrCannotHibernate = errors.New("session cannot be hibernated")

// ErrSnapshotTooLarge: the session's namespace is larger than its snapshot limit
// (its disk quota, or the server's snapshot limit). No snapshot was kept; the
// session stays live.
var ErrSnapshotTooLarge = errors.New("snapshot too large")

// ErrCannotResume: a hibernated session's snapshot could not be loaded into its
// new kernel because the kernel died or ran out of time while loading it (most
// often its memory limit: the OOM is named). The snapshot is kept and the
// session stays hibernated, so a resume after the cause is mended (a larger
// memory limit) brings it back; a reset or a close discards it.
var ErrCannotResume = errors.New("session cannot be resumed")

// The codes of the durable-session errors.
const (
	CodeCannotHibernate  Code = "cannot_hibernate"
	CodeSnapshotTooLarge Code = "snapshot_too_large"
	CodeCannotResume     Code = "cannot_resume"
)

// CheckpointInfo describes a session's last after-call checkpoint.
type CheckpointInfo struct {
	// AfterCall is the session's call it was taken after (1 is its first).
	AfterCall int `json:"after_call"`
	SnapshotInfo
}

// SnapshotInfo describes a session's saved namespace.
type SnapshotInfo struct {
	// Bytes is the snapshot file's size.
	Bytes int64 `json:"bytes"`
	// Names are the variables it holds, and Modules the imported modules it
	// re-imports (name -> module).
	Names   []string          `json:"names"`
	Modules map[string]string `json:"modules,omitempty"`
	// Skipped are the names that could not be saved, with why (a generator, an
	// open socket): they will not be restored.
	Skipped map[string]string `json:"skipped,omitempty"`
	// Taken is when it was written and TookMS how long that took.
	Taken  time.Time `json:"taken"`
	TookMS int64     `json:"took_ms"`
}

// StateRestored says what a call's session got back from a snapshot before the
// call ran: after a hibernation, or as a fork of another session.
type StateRestored struct {
	// From is "hibernation", "fork:<session id>" or "checkpoint" (an
	// after-call checkpoint, restored after the kernel died or was replaced).
	From string `json:"from"`
	// AfterCall is, for a checkpoint, the session's call it was taken after
	// (1 is its first call), and Taken when.
	AfterCall int       `json:"after_call,omitempty"`
	Taken     time.Time `json:"taken,omitzero"`
	// Restored are the names put back (variables and re-imported modules).
	Restored []string `json:"restored"`
	// NotRestored are the names that are not back, with why (not saved at
	// snapshot time, or failed to load).
	NotRestored map[string]string `json:"not_restored,omitempty"`
	// ByDesign are what a snapshot never keeps, on purpose, with why: IPython's
	// own input and output history caches (_, _i3, _5, ...), which a restored
	// kernel starts afresh. The user's own names are in Restored or NotRestored.
	ByDesign map[string]string `json:"by_design,omitempty"`
	// Bytes is the snapshot's size; TookMS how long the restore took, in
	// the kernel.
	Bytes  int64 `json:"bytes"`
	TookMS int64 `json:"took_ms"`
}

// ForkRequest is the body of POST /v1/sessions/{id}/fork.
type ForkRequest struct {
	// ID is the new session's id; it must not exist.
	ID string `json:"id"`
}

// ResumeResult is the answer of POST /v1/sessions/{id}/resume and
// /v1/sessions/{id}/fork: the session as it is now and what its kernel got back.
type ResumeResult struct {
	Session SessionInfo `json:"session"`
	// Resumed is false when the session was not hibernated (a second resume):
	// nothing was done.
	Resumed bool `json:"resumed"`
	// StateRestored says what the snapshot gave back; StateLost, with Reason,
	// that it could not be read and the kernel started empty (the session's next
	// call says so too).
	StateRestored *StateRestored `json:"state_restored,omitempty"`
	StateLost     bool           `json:"state_lost"`
	Reason        string         `json:"reason,omitempty"`
}
