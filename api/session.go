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
	Created        time.Time    `json:"created"`
	LastActivity   time.Time    `json:"last_activity"`
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
