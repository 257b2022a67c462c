package api

import "time"

// Request is one call: run Code in the session's kernel after staging Inputs.
type Request struct {
	// SessionID names the session (and so the kernel); see [ValidSessionID]. Calls
	// with the same id share variables, imports and files.
	SessionID string `json:"session_id"`

	// Code is the Python source to run. It must not be empty or blank.
	Code string `json:"code"`

	// Inputs are host paths to copy into the session's inputs/ directory before
	// the code runs; the code finds each at inputs/<basename>. Every path is
	// checked against the permission policy for filesystem.read.
	Inputs []string `json:"inputs,omitempty"`

	// Template names the template a new session is created with (empty: the
	// default one). For a session that exists already it must be empty or its
	// own template's name, or the call fails with ErrTemplateMismatch.
	Template string `json:"template,omitempty"`

	// Timeout bounds the execution: the code's run, from when it starts. Time spent
	// waiting in the session's queue and starting its kernel is not counted, with
	// one exception: a call still queued, past Timeout and the interrupt grace,
	// while its session runs an operation (a hibernate, fork, checkpoint) ends with
	// status timeout and does not run, rather than waiting for the operation's
	// own, longer bound. Zero means the server's default.
	Timeout time.Duration `json:"-"`

	// MaxWait, when set, bounds the whole call as the caller sees it: queue, kernel
	// start, staging and execution. A call whose code could not start in time ends
	// with status timeout and does not run; one that started runs for at most what
	// is left (and at most Timeout).
	MaxWait time.Duration `json:"-"`

	// Source says who asked, for the session's watchers (executor.Watch): "jupyter"
	// for a Jupyter client of the gateway API, which shows its own calls to its
	// clients; empty for /v1, MCP and the CLI. It is not part of the wire format.
	Source string `json:"-"`

	// Comms asks for the comm messages the code sends (a widget's comm_open and
	// comm_msg) as "comm" events, for a caller that passes them on to a Jupyter
	// frontend. They are not outputs: no Result, call log or /v1 stream holds them.
	Comms bool `json:"-"`
}

// ExecuteBody is the JSON body of POST /v1/sessions/{id}/execute.
type ExecuteBody struct {
	Code           string   `json:"code"`
	Inputs         []string `json:"inputs,omitempty"`
	Template       string   `json:"template,omitempty"`
	TimeoutSeconds float64  `json:"timeout_seconds,omitempty"`
	MaxWaitSeconds float64  `json:"max_wait_seconds,omitempty"`
	// Detach asks for a 202 DetachedCall at once instead of the Result; the call
	// runs in the background (see CallInfo).
	Detach bool `json:"detach,omitempty"`
}

// Body returns the wire form of r (the session id travels in the URL).
func (r Request) Body() ExecuteBody {
	return ExecuteBody{Code: r.Code, Inputs: r.Inputs, Template: r.Template, TimeoutSeconds: r.Timeout.Seconds(), MaxWaitSeconds: r.MaxWait.Seconds()}
}
