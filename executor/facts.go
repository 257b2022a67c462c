package executor

import (
	"time"

	"github.com/kernelbox/kernelbox/api"
)

// callFacts is what one call produced, gathered while it runs: how the execution
// ended, the collected outputs, notes and artifacts. result builds the call's Result
// from it in one place.
type callFacts struct {
	lostBefore bool               // the session's state was gone before the call began
	restored   *api.StateRestored // what a snapshot gave back before the call began
	notes      []string           // state, staging, file sync and artifact notes, in order
	end        ending
	out        collected
	artifacts  []api.Artifact
	codeStart  time.Time // when the execute_request was sent: outputs older than this are not the call's
}

// ending is how an execution ended: its execute_reply, or the executor's verdict on a
// timeout, a death or a lost connection.
type ending struct {
	status api.Status
	count  int // the execution count, when a reply told it

	// verdict says why the call did not end ok. For an error it yields to the
	// error output, which says the same with the kernel's own traceback; for a
	// timeout or a death it is the executor's account and wins.
	verdict *api.ErrorInfo

	// stateLost: the kernel died or was restarted during the call.
	stateLost bool
}

// result builds the call's Result from its facts.
func (f *callFacts) result(sessionID string, took time.Duration) *api.Result {
	r := &api.Result{
		SessionID:      sessionID,
		Status:         f.end.status,
		ExecutionCount: f.end.count,
		Outputs:        f.out.outputs,
		Stdout:         f.out.stdout,
		Stderr:         f.out.stderr,
		Result:         f.out.result,
		Error:          f.end.verdict,
		Artifacts:      f.artifacts,
		Truncated:      f.out.truncated,
		TruncationNote: f.out.truncationNote,
		StateLost:      f.lostBefore || f.end.stateLost,
		StateRestored:  f.restored,
		Notes:          f.notes,
		DurationMS:     took.Milliseconds(),
	}
	if f.out.err != nil && (r.Status == api.StatusOK || r.Status == api.StatusError) {
		r.Error = f.out.err
	}
	if r.Outputs == nil {
		r.Outputs = []api.Output{}
	}
	if r.Artifacts == nil {
		r.Artifacts = []api.Artifact{}
	}
	return r
}
