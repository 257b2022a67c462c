package executor

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/kernelbox/kernelbox/workspace"
)

type jobKind int

const (
	jobExecute jobKind = iota
	jobReset
)

// job is one queued unit of a session's work.
type job struct {
	ctx     context.Context
	kind    jobKind
	req     Request
	inputs  []workspace.Input
	onEvent func(Event)
	start   time.Time

	state  atomic.Int32 // jobQueued, jobRunning, jobCanceled
	done   chan struct{}
	res    *Result
	err    error
	notRun bool // the session closed before the job started
}

const (
	jobQueued int32 = iota
	jobRunning
	jobCanceled
)

func newJob(ctx context.Context, kind jobKind, req Request, inputs []workspace.Input, onEvent func(Event), start time.Time) *job {
	return &job{ctx: ctx, kind: kind, req: req, inputs: inputs, onEvent: onEvent, start: start, done: make(chan struct{})}
}

// begin moves a queued job to running; it fails if the caller gave up meanwhile.
func (j *job) begin() bool {
	return j.state.CompareAndSwap(jobQueued, jobRunning)
}

func (j *job) finish(r *Result, err error) {
	j.res, j.err = r, err
	close(j.done)
}

// wait blocks until the job is done. A caller whose context ends while its job is
// still queued gets the context's error at once; a running job reacts to the
// context itself (as a timeout) and wait returns its result.
func (j *job) wait() (*Result, error) {
	select {
	case <-j.done:
		return j.res, j.err
	case <-j.ctx.Done():
	}
	if j.state.CompareAndSwap(jobQueued, jobCanceled) {
		return nil, j.ctx.Err()
	}
	<-j.done
	return j.res, j.err
}

func (j *job) emit(e Event) {
	if j.onEvent != nil {
		j.onEvent(e)
	}
}
