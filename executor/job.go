package executor

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kernelbox/kernelbox/workspace"
)

type jobKind int

const (
	jobExecute jobKind = iota
	jobReset
	jobFiles
	jobFunc // fn runs on the worker (hibernate, resume, fork)
)

// job is one queued unit of a session's work.
type job struct {
	ctx     context.Context
	kind    jobKind
	req     Request
	inputs  []workspace.Input
	onEvent func(Event)
	start   time.Time

	// tap shows the job's events to the session's watchers once it runs
	// (watch.go); set by the worker while the caller may be emitting.
	tap atomic.Pointer[func(Event)]

	// files is a jobFiles job's work (files.go).
	files func(context.Context, SessionFiles) error
	// fn is a jobFunc job's work.
	fn func(*session) error

	// deadline is start + req.MaxWait (zero: none); cutByWait says the execution's
	// timeout was shortened to meet it.
	deadline  time.Time
	cutByWait bool

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
	j := &job{ctx: ctx, kind: kind, req: req, inputs: inputs, onEvent: onEvent, start: start, done: make(chan struct{})}
	if req.MaxWait > 0 {
		j.deadline = start.Add(req.MaxWait)
	}
	return j
}

// expired reports whether the job's max wait has passed.
func (j *job) expired() bool { return !j.deadline.IsZero() && !time.Now().Before(j.deadline) }

// waitedOut is the Result of a call whose max wait passed before its code could
// start: it did not run.
func (j *job) waitedOut(where string) *Result {
	return &Result{
		SessionID:  j.req.SessionID,
		Status:     StatusTimeout,
		Outputs:    []Output{},
		Artifacts:  []Artifact{},
		Error:      &ErrorInfo{Ename: "Timeout", Evalue: fmt.Sprintf("the call's max wait of %s passed %s; its code did not run", j.req.MaxWait, where)},
		Notes:      []string{"not run: max wait reached " + where},
		DurationMS: time.Since(j.start).Milliseconds(),
	}
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
	var expire <-chan time.Time
	if !j.deadline.IsZero() {
		t := time.NewTimer(time.Until(j.deadline))
		defer t.Stop()
		expire = t.C
	}
	select {
	case <-j.done:
		return j.res, j.err
	case <-j.ctx.Done():
		if j.state.CompareAndSwap(jobQueued, jobCanceled) {
			return nil, j.ctx.Err()
		}
	case <-expire:
		if j.state.CompareAndSwap(jobQueued, jobCanceled) {
			return j.waitedOut("while it waited behind the session's other calls"), nil
		}
	}
	<-j.done
	return j.res, j.err
}

func (j *job) emit(e Event) {
	if j.onEvent != nil {
		j.onEvent(e)
	}
	if tap := j.tap.Load(); tap != nil {
		(*tap)(e)
	}
}
