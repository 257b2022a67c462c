package executor

import (
	"errors"
	"fmt"
	"time"
)

// ErrKernelUnavailable: the session's kernel (SessionSpec.Template.Kernel, Options.Kernel) is
// not one its backend can run: the server has no such kernelspec, or the backend
// needs a Python kernel (its files move through the kernel as Python code). It is
// wrapped in api.ErrBackend when a call's kernel cannot start, so callers see both.
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

// Disabled returns why the executor runs no code, an error matching api.ErrDisabled
// (it has no backend, or one that refuses every call: Options.Backend), or nil
// when it can run code. Front ends ask it to refuse work at once, before they read
// a request's body.
func (e *Executor) Disabled() error { return e.disabled }
