package executor

import "errors"

// Errors callers branch on. Each is wrapped with details; test with errors.Is.
var (
	// ErrDisabled: the executor has no backend that can run code (backend "none").
	ErrDisabled = errors.New("code execution is disabled")

	// ErrInvalidRequest: the request is malformed (session id, empty or huge code,
	// bad inputs). Nothing was run.
	ErrInvalidRequest = errors.New("invalid request")

	// ErrDenied: the permission policy refused the call or one of its inputs.
	// Nothing was staged or run. The error is also a *permissions.DeniedError.
	ErrDenied = errors.New("permission denied")

	// ErrTooManySessions: starting another session would exceed MaxSessions.
	ErrTooManySessions = errors.New("too many sessions")

	// ErrQueueFull: the session already has QueueSize calls waiting.
	ErrQueueFull = errors.New("session queue is full")

	// ErrNoSession: the session does not exist.
	ErrNoSession = errors.New("no such session")

	// ErrSessionClosed: the session was closed or reset while the call waited.
	ErrSessionClosed = errors.New("session closed")

	// ErrClosed: the executor is closed.
	ErrClosed = errors.New("executor closed")

	// ErrBackend: the backend could not provide a kernel (server or container
	// failed to start). The call did not run.
	ErrBackend = errors.New("backend failure")
)
