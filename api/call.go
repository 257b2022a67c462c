package api

import (
	"errors"
	"time"
)

// CallState is where a registered call is in its life.
type CallState string

// The states a call can be in.
const (
	// CallQueued: the call waits for its session (behind other calls, or for a
	// kernel to start).
	CallQueued CallState = "queued"
	// CallRunning: the session's kernel runs the call's code.
	CallRunning CallState = "running"
	// CallDone: the call ended. CallInfo.Status says how, or CallInfo.Error says
	// why it could not run.
	CallDone CallState = "done"
)

// Errors of the call routes, besides ErrNotFound (no such call) and
// ErrInvalidRequest.
var (
	// ErrCallExpired: the call existed but was dropped by the server's retention
	// (age, count); its events and Result are gone.
	ErrCallExpired = errors.New("call expired")

	// ErrCallFinished: the call already ended, so it cannot be cancelled.
	ErrCallFinished = errors.New("call already finished")

	// ErrCallLost: the call was queued or running when the kernelbox process
	// that ran it ended (SIGKILL, a crash, a stop): its answer is gone. A
	// restarted server reports it so (CallInfo.Status CallLost), never as
	// not found.
	ErrCallLost = errors.New("call lost")
)

// CallLost is the CallInfo.Status of a call lost with the process that ran it
// (ErrCallLost; CallInfo.Error says why). Its State is CallDone.
const CallLost Status = "lost"

// MaxCallCodeBytes is how much of a call's code a CallInfo carries in listings;
// longer code is clipped and CallInfo.CodeClipped set.
const MaxCallCodeBytes = 4096

// CallInfo is a snapshot of one registered call: GET /v1/calls/{call_id}, and the
// items of GET /v1/sessions/{id}/calls.
type CallInfo struct {
	CallID    string `json:"call_id"`
	SessionID string `json:"session_id"`

	// Code is the call's code (clipped to MaxCallCodeBytes in listings; then
	// CodeClipped is set).
	Code        string `json:"code"`
	CodeClipped bool   `json:"code_clipped,omitempty"`

	State CallState `json:"state"`
	// Status is how the call ended; set when State is done and the call ran (or
	// was denied).
	Status Status `json:"status,omitempty"`
	// Error is why the call could not run (queue full, session closed, canceled
	// while queued, ...); set when State is done and there is no Result.
	Error *ErrorDetail `json:"error,omitempty"`

	Created  time.Time `json:"created"`
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
	// DurationMS is the time from Created to Finished (or to now while the call
	// is not done).
	DurationMS int64 `json:"duration_ms"`

	// Events is the sequence number of the call's last event so far (events are
	// numbered 1..Events).
	Events int64 `json:"events"`
	// LogBytes is the size of the events still held in the call's log.
	LogBytes int64 `json:"log_bytes"`
	// DroppedEvents and DroppedBytes count the oldest events dropped from the
	// log to stay within its bounds; readers that ask for them get a truncated
	// event instead. The Result is never dropped while the call is kept.
	DroppedEvents int64 `json:"dropped_events,omitempty"`
	DroppedBytes  int64 `json:"dropped_bytes,omitempty"`

	// Cancelled is set when the call was cancelled by request.
	Cancelled bool `json:"cancelled,omitempty"`

	// Result is the call's Result, when it is done and the answer includes it
	// (GET /v1/calls/{call_id} does; listings do not).
	Result *Result `json:"result,omitempty"`
}

// DetachedCall is the answer (202 Accepted) of an execute with "detach": true:
// the call is registered and will run; follow it by its id.
type DetachedCall struct {
	CallID    string `json:"call_id"`
	SessionID string `json:"session_id"`
}

// Truncation is the data of a "truncated" event: events From..To (sequence
// numbers, inclusive) were dropped from the call's log before this reader got
// them. Events counts them and Bytes is their size in the log.
type Truncation struct {
	From   int64 `json:"from"`
	To     int64 `json:"to"`
	Events int64 `json:"events"`
	Bytes  int64 `json:"bytes"`
}
