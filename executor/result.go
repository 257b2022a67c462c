package executor

import "github.com/kernelbox/kernelbox/api"

// The wire types live in package api; these aliases keep the executor's own
// vocabulary for callers that import only this package.
type (
	// Status is how a call ended; see api.Status.
	Status = api.Status
	// Result is the outcome of one call; see api.Result.
	Result = api.Result
	// ErrorInfo describes why a call did not end ok; see api.ErrorInfo.
	ErrorInfo = api.ErrorInfo
	// Artifact is a file the code produced; see api.Artifact.
	Artifact = api.Artifact
	// Output is one nbformat v4 output; see api.Output.
	Output = api.Output
	// Event is one thing that happened during a streamed call; see api.Event.
	Event = api.Event
	// SessionInfo is a snapshot of one session; see api.SessionInfo.
	SessionInfo = api.SessionInfo
	// Request is one call; see api.Request.
	Request = api.Request
)

// The statuses a Result can carry; see api.Status.
const (
	StatusOK         = api.StatusOK
	StatusError      = api.StatusError
	StatusTimeout    = api.StatusTimeout
	StatusKernelDied = api.StatusKernelDied
	StatusDenied     = api.StatusDenied
)

// MultilineString decodes an nbformat multiline string; see api.MultilineString.
func MultilineString(raw []byte) (string, error) { return api.MultilineString(raw) }
