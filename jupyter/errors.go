package jupyter

import (
	"errors"
	"fmt"
)

var (
	// ErrNotFound is returned (wrapped in an *HTTPError) when the server answers 404,
	// for example for a kernel id it does not know.
	ErrNotFound = errors.New("not found")

	// ErrKernelDied is returned for executions and requests in flight when the server
	// reports that the kernel died ("restarting" or "dead" status with no parent).
	ErrKernelDied = errors.New("kernel died")

	// ErrConnectionLost is returned when the WebSocket dropped and could not be
	// re-established.
	ErrConnectionLost = errors.New("kernel connection lost")

	// ErrReplyLost is returned for an execution whose kernel went idle and never
	// sent its execute_reply: ipykernel drops the reply of a request when a
	// KeyboardInterrupt (an interrupt) lands in its own code around the cell's. The
	// kernel lives on with its state; the cell may or may not have run.
	ErrReplyLost = errors.New("the kernel dropped the execute_reply")

	// ErrClosed is returned for calls on a Conn after Close.
	ErrClosed = errors.New("kernel connection closed")
)

// HTTPError is a non-success answer to a REST call.
type HTTPError struct {
	Method     string
	Path       string
	StatusCode int
	// Message is the server's explanation, from its JSON "message" or "reason" field
	// or the start of the body.
	Message string
}

func (e *HTTPError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("%s %s: %d: %s", e.Method, e.Path, e.StatusCode, e.Message)
	}
	return fmt.Sprintf("%s %s: %d", e.Method, e.Path, e.StatusCode)
}

// Is makes errors.Is(err, ErrNotFound) true for 404 answers.
func (e *HTTPError) Is(target error) bool {
	return target == ErrNotFound && e.StatusCode == 404
}

// KernelDiedError says how the server reported a kernel's death.
type KernelDiedError struct {
	// State is the execution_state the server sent: "restarting" (the server is
	// starting a fresh kernel under the same id; all state is lost) or "dead" (the
	// server gave up restarting it) or "shutdown" (the kernel answered a shutdown
	// request someone else sent: its server is stopping or restarting it).
	State string
}

func (e *KernelDiedError) Error() string {
	switch e.State {
	case "restarting":
		return "kernel died (the server is restarting it; its state is lost)"
	case "shutdown":
		return "kernel shut down (its server was asked to stop or restart it; its state is lost)"
	}
	return "kernel died (" + e.State + ")"
}

// Unwrap makes errors.Is(err, ErrKernelDied) true.
func (e *KernelDiedError) Unwrap() error { return ErrKernelDied }
