package executor

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kernelbox/kernelbox/api"
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
	req     api.Request
	inputs  []workspace.Input
	onEvent func(api.Event)
	start   time.Time

	// tap shows the job's events to the session's watchers once it runs
	// (watch.go); set by the worker while the caller may be emitting.
	tap atomic.Pointer[func(api.Event)]

	// files is a jobFiles job's work (files.go).
	files func(context.Context, SessionFiles) error
	// fn is a jobFunc job's work, and opName what it is called in a message
	// ("hibernate", "fork"...): "" for a job that starts a kernel (a resume, an
	// adoption's reconnection), which a call would wait for as its own start.
	fn     func(*session) error
	opName string

	// deadline is start + req.MaxWait (zero: none); cutByWait says the execution's
	// timeout was shortened to meet it.
	deadline  time.Time
	cutByWait bool

	// opBound, for a call, is its own time bound (its timeout and the interrupt
	// grace): past it, a call still queued while its session runs an operation
	// (op: a hibernate, fork, checkpoint, resume) answers that it did not run,
	// rather than waiting for the operation's own, longer bound (issue 46 item 8).
	opBound time.Duration
	op      *atomic.Pointer[string]

	state  atomic.Int32 // jobQueued, jobRunning, jobCanceled
	done   chan struct{}
	res    *api.Result
	err    error
	notRun bool // the session closed before the job started
}

// opCheckpoint names the after-call checkpoint as an operation (session.op).
var opCheckpoint = "after-call checkpoint"

// opHibernate names a hibernation (Hibernate, the idle cull, a hibernate stop).
const opHibernate = "hibernate"

const (
	jobQueued int32 = iota
	jobRunning
	jobCanceled
)

func newJob(ctx context.Context, kind jobKind, req api.Request, inputs []workspace.Input, onEvent func(api.Event), start time.Time) *job {
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
func (j *job) waitedOut(where string) *api.Result {
	return &api.Result{
		SessionID:  j.req.SessionID,
		Status:     api.StatusTimeout,
		Outputs:    []api.Output{},
		Artifacts:  []api.Artifact{},
		Error:      &api.ErrorInfo{Ename: "Timeout", Evalue: fmt.Sprintf("the call's max wait of %s passed %s; its code did not run", j.req.MaxWait, where)},
		Notes:      []string{"not run: max wait reached " + where},
		DurationMS: time.Since(j.start).Milliseconds(),
	}
}

// begin moves a queued job to running; it fails if the caller gave up meanwhile.
func (j *job) begin() bool {
	return j.state.CompareAndSwap(jobQueued, jobRunning)
}

func (j *job) finish(r *api.Result, err error) {
	j.res, j.err = r, err
	close(j.done)
}

// wait blocks until the job is done. A caller whose context ends while its job is
// still queued gets the context's error at once; a running job reacts to the
// context itself (as a timeout) and wait returns its result.
func (j *job) wait() (*api.Result, error) {
	var expire <-chan time.Time
	if !j.deadline.IsZero() {
		t := time.NewTimer(time.Until(j.deadline))
		defer t.Stop()
		expire = t.C
	}
	var behindOp <-chan time.Time
	if j.opBound > 0 && j.op != nil {
		t := time.NewTimer(time.Until(j.start.Add(j.opBound)))
		defer t.Stop()
		behindOp = t.C
	}
	for {
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
		case <-behindOp:
			// Checked again every quarter second: an operation may start
			// after the call ahead of this one ends.
			behindOp = time.After(250 * time.Millisecond)
			if op := j.op.Load(); op != nil && j.state.CompareAndSwap(jobQueued, jobCanceled) {
				r := j.waitedOut("while the session's " + *op + " ran")
				r.Error.Evalue = fmt.Sprintf("the call waited %s, its time bound, while the session's %s ran; its code did not run",
					j.opBound.Round(time.Millisecond), *op)
				return r, nil
			}
			continue
		}
		break
	}
	<-j.done
	return j.res, j.err
}

// emitComm passes a comm event to the caller when it asked for them
// (Request.Comms) and to the session's watchers.
func (j *job) emitComm(e api.Event) {
	if j.req.Comms && j.onEvent != nil {
		j.onEvent(e)
	}
	if tap := j.tap.Load(); tap != nil {
		(*tap)(e)
	}
}

func (j *job) emit(e api.Event) {
	if j.onEvent != nil {
		j.onEvent(e)
	}
	if tap := j.tap.Load(); tap != nil {
		(*tap)(e)
	}
}
