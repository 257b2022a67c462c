package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/jupyter"
)

// callBound is a call's own time bound: its timeout (the default when it sets
// none, capped by MaxTimeout) and the grace an interrupted call has to stop.
func (e *Executor) callBound(req api.Request) time.Duration {
	t := req.Timeout
	if t == 0 {
		t = e.opts.DefaultTimeout
	}
	return min(t, e.opts.MaxTimeout) + e.opts.InterruptGrace
}

// execute runs one call on the session's worker: it gathers what the call produced in
// a callFacts, then builds the Result from it once.
func (s *session) execute(j *job) (*api.Result, error) {
	o := &s.e.opts
	timeout := j.req.Timeout
	if timeout == 0 {
		timeout = o.DefaultTimeout
	}
	timeout = min(timeout, o.MaxTimeout)

	if err := s.ensureKernel(j); err != nil {
		if j.expired() && !errors.Is(err, api.ErrSessionClosed) {
			return j.waitedOut("while the session's kernel started (" + err.Error() + ")"), nil
		}
		return nil, err
	}
	// A stop that began while the kernel started found no kernel to interrupt:
	// the code does not start now, so that the stop's hibernation or keep is
	// not held behind it (hibernateAll).
	if s.e.stopping() {
		return nil, fmt.Errorf("%w: %q: kernelbox is stopping; the call's code did not run", api.ErrSessionClosed, s.id)
	}
	// Starting a kernel left the state at "starting"; the code runs now.
	s.setState(api.StateBusy)
	var f callFacts
	names, notes, err := s.stage(j.inputs)
	if err != nil {
		return nil, err
	}
	if !j.deadline.IsZero() {
		left := time.Until(j.deadline)
		if left <= 0 {
			return j.waitedOut("before its code could start (queue, kernel start and staging)"), nil
		}
		if left < timeout {
			timeout, j.cutByWait = left, true
		}
	}
	syncer, _ := s.syncer()
	if syncer != nil && (len(names) > 0 || s.k.fresh) {
		if err := syncer.PushInputs(j.ctx, s.k.conn, s.ws.Dir(), names); err != nil {
			return nil, fmt.Errorf("%w: push inputs to the kernel: %w", api.ErrBackend, err)
		}
	}
	s.k.fresh = false
	// Taken only now: a call refused above leaves the report for the next one.
	if s.ckpt.note != "" {
		f.notes = append(f.notes, s.ckpt.note)
		s.ckpt.note = ""
	}
	lost, why := s.takeLost()
	if lost, why = s.restoreCheckpoint(j.ctx, lost, why, &f); lost {
		f.lostBefore = true
		f.notes = append(f.notes, "state lost: "+why)
	}
	if r := s.takeRestored(); r != nil {
		f.restored = r
		f.notes = append(f.notes, restoredNote(r))
	}
	f.notes = append(f.notes, notes...)

	runCtx, cancel := context.WithTimeout(j.ctx, timeout)
	defer cancel()
	stopOnClose := context.AfterFunc(s.ctx, cancel)
	defer stopOnClose()

	col := newCollector(o, j.emit)
	col.onComm = j.emitComm
	s.interrupted.Store(false)
	j.emit(api.Event{Type: "status", State: "running"})
	ex, err := s.call(runCtx, j, col, syncer, timeout, &f)
	if err != nil {
		return nil, err
	}
	s.ckpt.lostInCall = f.end.stateLost
	s.checkCount(&f)
	if n := foreignOutput(ex); n > 0 {
		f.notes = append(f.notes, fmt.Sprintf("%d characters of this call's output were written by background threads of earlier calls while it ran (the kernel files them under the running call)", n))
	}
	f.out = col.finish()
	if strings.ContainsRune(f.out.stdout, utf8.RuneError) || strings.ContainsRune(f.out.stderr, utf8.RuneError) {
		f.notes = append(f.notes, "stdout/stderr: bytes that are not valid UTF-8 are shown as U+FFFD (the kernel replaced them)")
	}
	s.collect(s.ctx, &f, ex)
	return f.result(s.id, time.Since(j.start)), nil
}

// checkCount is the backstop for a kernel replaced behind kernelbox's back (a death
// and restart whose notice never arrived): execution counts only grow in one
// interpreter, so a reply whose count does not pass the last one's comes from a
// fresh kernel, and the state the earlier calls built is gone.
func (s *session) checkCount(f *callFacts) {
	if s.k == nil || f.end.count <= 0 {
		return
	}
	if prev := s.k.count; prev > 0 && f.end.count <= prev && !f.lostBefore {
		f.lostBefore = true
		f.notes = append(f.notes, fmt.Sprintf("state lost: the kernel was replaced since the previous call (its execution count went from %d back to %d)", prev, f.end.count))
	}
	s.k.count = f.end.count
}

// call sends the call's execute_request and records how it ended in f.end. It
// returns the execution (nil when it could not be sent), or an error when the
// session closed during the call.
func (s *session) call(ctx context.Context, j *job, col *collector, syncer FileSyncer, timeout time.Duration, f *callFacts) (*jupyter.Execution, error) {
	req := jupyter.ExecuteRequest{Code: j.req.Code, StoreHistory: true}
	if syncer != nil {
		if expr := syncer.OutputsProbe(); expr != "" {
			req.UserExpressions = map[string]string{probeKey: expr}
		}
	}
	if n, size := s.k.conn.TakeStray(); n > 0 {
		f.notes = append(f.notes, fmt.Sprintf("%d output messages (%d bytes) arrived after earlier calls had ended (from their background threads or processes) and were dropped", n, size))
	}
	stopWatch := s.k.closeOnLost()
	defer stopWatch()
	f.codeStart = time.Now()
	s.afterInterrupts()
	ex, err := s.k.conn.Execute(ctx, req)
	if err != nil {
		f.end = s.kernelFailed(s.ctx, nil, err)
		return nil, nil
	}
	defer ex.Close()
	s.running.Store(ex)
	defer s.running.Store(nil)
	f.end, err = s.await(ctx, j, ex, col, timeout)
	return ex, err
}

// await reads the execution's output until it completes, fails or times out (ctx,
// the call's context, ends), and says how it ended.
func (s *session) await(ctx context.Context, j *job, ex *jupyter.Execution, col *collector, timeout time.Duration) (ending, error) {
	for {
		m, err := ex.Next(ctx)
		switch {
		case err == nil:
			col.add(m)
		case err == io.EOF:
			return s.completed(ex), nil
		case errors.Is(err, jupyter.ErrReplyLost):
			s.log.Warn("the kernel dropped a call's reply", "err", err)
			return ending{status: api.StatusError, verdict: &api.ErrorInfo{Ename: "ReplyLost",
				Evalue: "the kernel went idle without answering the call (an interrupt reached it outside the cell's code, and the kernel drops that request's reply): the code may or may not have run; the session's state is kept"}}, nil
		case ctx.Err() != nil:
			if s.ctx.Err() != nil {
				return ending{}, fmt.Errorf("%w: %q closed during the call", api.ErrSessionClosed, s.id)
			}
			why := fmt.Sprintf("the call exceeded its %s timeout", timeout)
			if j.cutByWait {
				why = fmt.Sprintf("the call reached its max wait of %s (%s of it left when the code started)", j.req.MaxWait, timeout.Round(time.Millisecond))
			}
			if j.ctx.Err() != nil {
				why = "the caller canceled the call"
			}
			return s.timedOut(s.ctx, ex, col, why), nil
		default:
			return s.kernelFailed(s.ctx, ex, err), nil
		}
	}
}

// completed reads the status from the execute_reply.
func (s *session) completed(ex *jupyter.Execution) ending {
	reply, err := ex.Reply()
	if err != nil {
		return s.kernelFailed(s.ctx, ex, err)
	}
	if reply.Status == "error" && reply.Ename == "KeyboardInterrupt" && !s.interrupted.Load() {
		if err := s.stoppedFromOutside(); err != nil {
			return s.kernelFailed(s.ctx, ex, err)
		}
	}
	end := ending{status: api.StatusOK, count: reply.ExecutionCount}
	switch reply.Status {
	case "ok":
	case "aborted":
		end.status = api.StatusError
		end.verdict = &api.ErrorInfo{Ename: "Aborted", Evalue: "the kernel aborted the execution"}
	default:
		end.status = api.StatusError
		// The iopub error output normally says the same; this covers a kernel
		// that sends none (the result then keeps the output's version).
		tb := make([]string, len(reply.Traceback))
		for i, l := range reply.Traceback {
			tb[i] = StripANSI(l)
		}
		end.verdict = &api.ErrorInfo{Ename: reply.Ename, Evalue: reply.Evalue, Traceback: tb}
	}
	return end
}

// stoppedFromOutside tells a KeyboardInterrupt nobody asked kernelbox for from one
// the code raised: a server being stopped (SIGTERM, docker stop) interrupts its
// kernels before it shuts them down, so such a call would read as the user's error
// with its state kept. It waits up to shutdownNotice for the kernel's connection to
// end and returns why it did, or nil when it lives on.
func (s *session) stoppedFromOutside() error {
	if s.k == nil || s.k.conn == nil {
		return nil
	}
	select {
	case <-s.k.conn.Done():
		return s.k.conn.Err()
	case <-time.After(shutdownNotice):
		return nil
	}
}

// shutdownNotice is how long after an unexplained KeyboardInterrupt a call waits
// for news of its kernel's shutdown. A stopped Jupyter Server interrupts its kernels
// and shuts them down after; on the loaded 2-core CI machine (load average 6) that
// took more than one second (TestLocalServerStoppedMidCall read the interrupt as the
// user's). Only a call that ends with a KeyboardInterrupt kernelbox did not send
// waits for it: code that raises one itself.
const shutdownNotice = 3 * time.Second

// timedOut interrupts a call past its deadline. If the kernel stops within the grace
// period the session keeps its state; otherwise the kernel is restarted, or, when its
// server does not answer, abandoned. ctx is the session's context (the call's has
// ended). Whatever the server does, the call ends within interruptBound +
// InterruptGrace + restartBound of its deadline.
func (s *session) timedOut(ctx context.Context, ex *jupyter.Execution, col *collector, why string) ending {
	o := &s.e.opts
	ictx, icancel := context.WithTimeout(ctx, interruptBound)
	ierr := s.k.client.Interrupt(ictx, s.k.id)
	icancel()
	if ierr == nil {
		gctx, gcancel := context.WithTimeout(ctx, o.InterruptGrace)
		defer gcancel()
		for {
			m, err := ex.Next(gctx)
			if err == nil {
				col.add(m)
				continue
			}
			if err == io.EOF || errors.Is(err, jupyter.ErrReplyLost) {
				// A lost reply: the interrupt reached the kernel outside the
				// cell's code (the code had ended); the kernel is idle and whole.
				end := ending{status: api.StatusTimeout,
					verdict: &api.ErrorInfo{Ename: "Timeout", Evalue: why + "; it was interrupted and the session's state is kept"}}
				if reply, rerr := ex.Reply(); rerr == nil {
					end.count = reply.ExecutionCount
				}
				return end
			}
			if gctx.Err() == nil { // the kernel died while being interrupted
				end := s.kernelFailed(ctx, ex, err)
				end.status = api.StatusTimeout
				return end
			}
			break
		}
	} else if ctx.Err() == nil {
		// The server did not take the interrupt: it is unlikely to take a restart.
		// The kernel is given up (shut down in the background) and the next call
		// starts a fresh one.
		s.log.Warn("the kernel's server did not take an interrupt; abandoning the kernel", "err", ierr)
		s.abandonKernel()
		return ending{status: api.StatusTimeout, stateLost: true,
			verdict: &api.ErrorInfo{Ename: "Timeout", Evalue: fmt.Sprintf("%s; the kernel's server did not answer an interrupt (%v), so the kernel was given up and the session's state is lost", why, ierr)}}
	}
	// The kernel ignored the interrupt (or the interrupt failed): restart it.
	s.log.Warn("kernel did not stop after interrupt; restarting it", "grace", o.InterruptGrace)
	end := ending{status: api.StatusTimeout, stateLost: true,
		verdict: &api.ErrorInfo{Ename: "Timeout", Evalue: fmt.Sprintf("%s; the kernel did not stop within %s of an interrupt and was restarted, so the session's state is lost", why, o.InterruptGrace)}}
	rctx, rcancel := context.WithTimeout(ctx, min(o.StartTimeout, restartBound))
	defer rcancel()
	if err := s.restartKernel(rctx); err != nil {
		s.log.Warn("restart after timeout failed; the next call starts a new kernel", "err", err)
		s.abandonKernel()
	}
	return end
}

// A timed-out call waits at most interruptBound for the server to take its
// interrupt and restartBound for the restart of a kernel that ignored it.
const (
	interruptBound = 3 * time.Second
	restartBound   = 30 * time.Second
)

// abandonKernel drops the session's kernel and shuts it down in the background
// (bounded by ShutdownTimeout; Close waits for it): a server that stopped answering
// must not hold the call that found out.
func (s *session) abandonKernel() {
	k := s.k
	s.setKernel(nil)
	if k == nil {
		return
	}
	if k.conn != nil {
		_ = k.conn.Close()
	}
	s.e.wg.Add(1)
	go func() {
		defer s.e.wg.Done()
		if err := k.shutdown(context.Background(), s.e.opts.ShutdownTimeout); err != nil {
			s.log.Warn("shutting down an abandoned kernel", "err", err)
		}
	}()
}

// kernelFailed tells a call whose kernel died from one whose connection was lost
// (ex is the execution, nil when the request could not be sent). It
// asks the placement and the server under its own bounded context derived from ctx
// without its cancellation: the call's context has usually ended by now.
func (s *session) kernelFailed(ctx context.Context, ex *jupyter.Execution, err error) ending {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	cause := s.k.diagnose(ctx)
	if !errors.Is(err, jupyter.ErrKernelDied) && s.k.serverAlive(ctx) && cause == "" {
		if kr, kerr := s.k.client.Kernel(ctx, s.k.id); kerr == nil && kr.ExecutionState != "dead" {
			// Only the connection failed; the kernel and its state are fine.
			return ending{status: api.StatusError, verdict: &api.ErrorInfo{Ename: "ConnectionLost",
				Evalue: fmt.Sprintf("the connection to the kernel dropped during the call (%v); its output may be incomplete, the session's state is kept", err)}}
		}
	}
	msg := "the kernel died during the call"
	if ex != nil && !ex.Started() && errors.Is(err, jupyter.ErrKernelDied) {
		msg = "the kernel died before it began the call (it never reported running its code)"
	}
	if cause != "" {
		msg += ": " + cause
	} else if died := (*jupyter.KernelDiedError)(nil); errors.As(err, &died) && died.State == "shutdown" {
		msg = "the kernel was shut down during the call: its server was stopped (SIGTERM, docker stop) or restarted it"
	} else if errors.Is(err, jupyter.ErrKernelDied) {
		msg += " (the process exited; common causes: os._exit, a crash in native code, running out of memory)"
	} else {
		msg += " (its server went away: " + err.Error() + ")"
	}
	msg += "; the next call starts a fresh kernel"
	s.log.Warn("kernel died", "cause", cause, "err", err)
	s.e.opts.Observer.KernelDied()
	s.markLost("the kernel died during an earlier call")
	if s.k.conn != nil {
		_ = s.k.conn.Close()
	}
	return ending{status: api.StatusKernelDied, stateLost: true, verdict: &api.ErrorInfo{Ename: "KernelDied", Evalue: msg}}
}
