package executor

import (
	"errors"
	"fmt"
	"time"

	"github.com/kernelbox/kernelbox/api"
)

// Errors callers branch on. Each is wrapped with details; test with errors.Is. They
// are the api package's sentinels, so a client's error answers match them too.
var (
	// ErrDisabled: the executor has no backend that can run code (backend "none").
	ErrDisabled = api.ErrDisabled

	// ErrInvalidRequest: the request is malformed (session id, empty or huge code,
	// bad inputs). Nothing was run.
	ErrInvalidRequest = api.ErrInvalidRequest

	// ErrDenied: the permission policy refused the call or one of its inputs.
	// Nothing was staged or run. The error is also a *permissions.DeniedError.
	ErrDenied = api.ErrDenied

	// ErrTooManySessions: starting another session would exceed MaxSessions.
	ErrTooManySessions = api.ErrTooManySessions

	// ErrQueueFull: the session already has QueueSize calls waiting.
	ErrQueueFull = api.ErrQueueFull

	// ErrNoSession: the session does not exist.
	ErrNoSession = api.ErrNotFound

	// ErrSessionClosed: the session was closed or reset while the call waited.
	ErrSessionClosed = api.ErrSessionClosed

	// ErrClosed: the executor is closed.
	ErrClosed = api.ErrClosed

	// ErrBackend: the backend could not provide a kernel (server or container
	// failed to start). The call did not run.
	ErrBackend = api.ErrBackend
)

// ErrKernelUnavailable: the session's kernel (SessionSpec.Template.Kernel, Options.Kernel) is
// not one its backend can run: the server has no such kernelspec, or the backend
// needs a Python kernel (its files move through the kernel as Python code). It is
// wrapped in ErrBackend when a call's kernel cannot start, so callers see both.
var ErrKernelUnavailable = errors.New("kernel not available")

// StepTimeoutError is a step of connecting to a kernel (the WebSocket dial, the
// kernel_info request, the probe execution) that did not finish within its bound, a
// third of Options.ConnectTimeout: a server that accepts a connection and then says
// nothing holds a call no longer than that. Read it with errors.As.
type StepTimeoutError struct {
	Step  string        // "websocket dial", "kernel_info", "probe execution"
	Bound time.Duration // how long the step was given
}

func (e *StepTimeoutError) Error() string {
	return fmt.Sprintf("%s did not finish within %s", e.Step, e.Bound)
}

// ErrCannotResume: a hibernated session's snapshot could not be loaded (its
// kernel died or ran out of time loading it); the session stays hibernated with
// its snapshot.
var ErrCannotResume = api.ErrCannotResume

// ErrCannotHibernate: the session cannot be hibernated or forked (not Python, a
// backend whose kernels keep their files away from the session directory, no
// kernel). The session is left as it was.
var ErrCannotHibernate = api.ErrCannotHibernate

// ErrSnapshotTooLarge: the session's namespace is over its snapshot limit
// (Options.SnapshotMaxBytes, else its disk quota). No snapshot was kept; the
// session stays live.
var ErrSnapshotTooLarge = api.ErrSnapshotTooLarge

// Disabled returns why the executor runs no code, an error matching ErrDisabled
// (it has no backend, or one that refuses every call: Options.Backend), or nil
// when it can run code. Front ends ask it to refuse work at once, before they read
// a request's body.
func (e *Executor) Disabled() error { return e.disabled }
