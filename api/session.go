package api

import (
	"regexp"
	"time"
)

// SessionIDPattern is the rule every session id follows: 1 to 64 characters of
// A-Z, a-z, 0-9, '_' and '-'. Ids are validated, never rewritten. It is exported so
// that schemas (MCP tool inputs) state the same rule.
const SessionIDPattern = `^[A-Za-z0-9_-]{1,64}$`

// SessionIDRule says the rule in words, for error messages and tool descriptions.
const SessionIDRule = "1-64 characters of A-Z, a-z, 0-9, '_' and '-'"

var sessionID = regexp.MustCompile(SessionIDPattern)

// ValidSessionID reports whether id follows [SessionIDPattern].
func ValidSessionID(id string) bool { return sessionID.MatchString(id) }

// SessionState is where a session is in its life.
type SessionState string

// The states a session can be in.
const (
	// StateNew: the session exists but has no kernel yet.
	StateNew SessionState = "new"
	// StateStarting: its kernel is being started.
	StateStarting SessionState = "starting"
	// StateIdle: its kernel is up and runs nothing.
	StateIdle SessionState = "idle"
	// StateBusy: its kernel runs a call.
	StateBusy SessionState = "busy"
	// StateDead: its kernel is gone; the next call starts a fresh one.
	StateDead SessionState = "dead"
)

// SessionInfo is a snapshot of one session.
type SessionInfo struct {
	ID             string       `json:"id"`
	Template       string       `json:"template"`
	State          SessionState `json:"state"`
	ExecutionCount int          `json:"execution_count"`
	Calls          int          `json:"calls"`
	Queued         int          `json:"queued"`
	KernelID       string       `json:"kernel_id,omitempty"`
	// Dir is the session directory as the session's kernel sees it: an absolute
	// path (the host path on local, /workspace on docker), set once the session
	// has had a kernel on a placement that can name it, and kept while it
	// hibernates. Empty before that, and on backends whose kernels keep the
	// session's files in a directory of their own (remote, swarm). Clients that
	// map kernel paths to the files API take it from here, never from the
	// kernel's current directory, which the code may change.
	Dir          string    `json:"dir,omitempty"`
	Created      time.Time `json:"created"`
	LastActivity time.Time `json:"last_activity"`
	// Snapshot describes the saved namespace of a hibernated session.
	Snapshot *SnapshotInfo `json:"snapshot,omitempty"`
	// Hibernated is when the session was hibernated (zero when it is not).
	Hibernated time.Time `json:"hibernated,omitzero"`
	// Checkpoint is the session's last after-call checkpoint (its template's
	// checkpoint setting): what a kernel death would bring back.
	Checkpoint *CheckpointInfo `json:"checkpoint,omitempty"`
}

// Health is the answer of GET /healthz.
type Health struct {
	// Status is "ok" or "degraded".
	Status   string `json:"status"`
	Backend  string `json:"backend"`
	Sessions int    `json:"sessions"`
	// Problem says why the backend cannot place sessions, when it cannot.
	Problem string `json:"problem,omitempty"`
}
