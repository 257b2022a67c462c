package executor

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/workspace"
)

// execute runs one call on the session's worker.
func (s *session) execute(j *job) (*Result, error) {
	o := &s.e.opts
	timeout := j.req.Timeout
	if timeout == 0 {
		timeout = o.DefaultTimeout
	}
	timeout = min(timeout, o.MaxTimeout)

	if err := s.ensureKernel(j); err != nil {
		return nil, err
	}
	r := &Result{SessionID: s.id, Outputs: []Output{}, Artifacts: []Artifact{}}
	if lost, why := s.takeLost(); lost {
		r.StateLost = true
		r.Notes = append(r.Notes, "state lost: "+why)
	}
	var names []string
	if len(j.inputs) > 0 {
		staged, err := s.ws.Stage(j.inputs)
		if err != nil {
			return nil, stageError(err)
		}
		for _, st := range staged {
			names = append(names, st.Name)
			note := fmt.Sprintf("staged inputs/%s (%d bytes)", st.Name, st.Size)
			if st.Unchanged {
				note += ", unchanged since it was last staged: not copied again"
			}
			r.Notes = append(r.Notes, note)
		}
	}
	syncer, _ := s.k.placement.(FileSyncer)
	if syncer != nil && (len(names) > 0 || s.k.fresh) {
		if err := syncer.PushInputs(j.ctx, s.k.conn, s.ws.Dir(), names); err != nil {
			return nil, fmt.Errorf("%w: push inputs to the kernel: %v", ErrBackend, err)
		}
	}
	s.k.fresh = false

	runCtx, cancel := context.WithTimeout(j.ctx, timeout)
	defer cancel()
	stopOnClose := context.AfterFunc(s.ctx, cancel)
	defer stopOnClose()

	col := newCollector(o, j.onEvent)
	j.emit(Event{Type: "status", State: "running"})
	req := jupyter.ExecuteRequest{Code: j.req.Code, StoreHistory: true}
	if syncer != nil {
		if expr := syncer.OutputsProbe(); expr != "" {
			req.UserExpressions = map[string]string{probeKey: expr}
		}
	}
	stopWatch := s.k.closeOnLost()
	defer stopWatch()
	ex, err := s.k.conn.Execute(runCtx, req)
	if err != nil {
		s.kernelFailed(r, err)
	} else {
		err = s.await(j, ex, col, r, runCtx, timeout)
		ex.Close()
		if err != nil {
			return nil, err
		}
	}
	verdict := r.Error
	col.fill(r)
	switch {
	case r.Status == StatusError && r.Error == nil:
		r.Error = verdict // from the reply, when no error output arrived
	case r.Status != StatusError && r.Status != StatusOK:
		r.Error = verdict // a timeout or death: the executor's verdict wins
	}
	s.collect(r, col, ex)
	r.DurationMS = time.Since(j.start).Milliseconds()
	return r, nil
}

// await reads the execution's output until it completes, fails or times out.
func (s *session) await(j *job, ex *jupyter.Execution, col *collector, r *Result, runCtx context.Context, timeout time.Duration) error {
	for {
		m, err := ex.Next(runCtx)
		switch {
		case err == nil:
			col.add(m)
		case err == io.EOF:
			s.completed(ex, r)
			return nil
		case runCtx.Err() != nil:
			if s.ctx.Err() != nil {
				return fmt.Errorf("%w: %q closed during the call", ErrSessionClosed, s.id)
			}
			why := fmt.Sprintf("the call exceeded its %s timeout", timeout)
			if j.ctx.Err() != nil {
				why = "the caller canceled the call"
			}
			s.timedOut(ex, col, r, why)
			return nil
		default:
			s.kernelFailed(r, err)
			return nil
		}
	}
}

// completed fills the status from the execute_reply.
func (s *session) completed(ex *jupyter.Execution, r *Result) {
	reply, err := ex.Reply()
	if err != nil {
		s.kernelFailed(r, err)
		return
	}
	r.ExecutionCount = reply.ExecutionCount
	switch reply.Status {
	case "ok":
		r.Status = StatusOK
	case "aborted":
		r.Status = StatusError
		r.Error = &ErrorInfo{Ename: "Aborted", Evalue: "the kernel aborted the execution"}
	default:
		r.Status = StatusError
		// The iopub error output normally says the same; this covers a kernel
		// that sends none (execute then keeps the output's version).
		tb := make([]string, len(reply.Traceback))
		for i, l := range reply.Traceback {
			tb[i] = StripANSI(l)
		}
		r.Error = &ErrorInfo{Ename: reply.Ename, Evalue: reply.Evalue, Traceback: tb}
	}
}

// timedOut interrupts a call past its deadline. If the kernel stops within the grace
// period the session keeps its state; otherwise the kernel is restarted.
func (s *session) timedOut(ex *jupyter.Execution, col *collector, r *Result, why string) {
	o := &s.e.opts
	r.Status = StatusTimeout
	ictx, icancel := context.WithTimeout(s.ctx, 5*time.Second)
	ierr := s.k.client.Interrupt(ictx, s.k.id)
	icancel()
	if ierr == nil {
		gctx, gcancel := context.WithTimeout(s.ctx, o.InterruptGrace)
		defer gcancel()
		for {
			m, err := ex.Next(gctx)
			if err == nil {
				col.add(m)
				continue
			}
			if err == io.EOF {
				if reply, rerr := ex.Reply(); rerr == nil {
					r.ExecutionCount = reply.ExecutionCount
				}
				r.Error = &ErrorInfo{Ename: "Timeout", Evalue: why + "; it was interrupted and the session's state is kept"}
				return
			}
			if gctx.Err() == nil { // the kernel died while being interrupted
				s.kernelFailed(r, err)
				r.Status = StatusTimeout
				return
			}
			break
		}
	}
	// The kernel ignored the interrupt (or the interrupt failed): restart it.
	s.log.Warn("kernel did not stop after interrupt; restarting it", "grace", o.InterruptGrace)
	r.StateLost = true
	r.Error = &ErrorInfo{Ename: "Timeout", Evalue: fmt.Sprintf("%s; the kernel did not stop within %s of an interrupt and was restarted, so the session's state is lost", why, o.InterruptGrace)}
	rctx, rcancel := context.WithTimeout(s.ctx, o.StartTimeout)
	defer rcancel()
	if err := s.k.restart(rctx, s.e); err != nil {
		s.log.Warn("restart after timeout failed; the next call starts a new kernel", "err", err)
		_ = s.k.shutdown(rctx, o.ShutdownTimeout)
		s.setKernel(nil)
	}
}

// kernelFailed records a call whose kernel died or whose connection was lost.
func (s *session) kernelFailed(r *Result, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cause := s.k.diagnose(ctx)
	if !errors.Is(err, jupyter.ErrKernelDied) && s.k.serverAlive(ctx) && cause == "" {
		if kr, kerr := s.k.client.Kernel(ctx, s.k.id); kerr == nil && kr.ExecutionState != "dead" {
			// Only the connection failed; the kernel and its state are fine.
			r.Status = StatusError
			r.Error = &ErrorInfo{Ename: "ConnectionLost", Evalue: fmt.Sprintf("the connection to the kernel dropped during the call (%v); its output may be incomplete, the session's state is kept", err)}
			return
		}
	}
	msg := "the kernel died during the call"
	if cause != "" {
		msg += ": " + cause
	} else if errors.Is(err, jupyter.ErrKernelDied) {
		msg += " (the process exited; common causes: os._exit, a crash in native code, running out of memory)"
	} else {
		msg += " (its server went away: " + err.Error() + ")"
	}
	msg += "; the next call starts a fresh kernel"
	s.log.Warn("kernel died", "cause", cause, "err", err)
	s.e.opts.Observer.KernelDied()
	r.Status = StatusKernelDied
	r.StateLost = true
	r.Error = &ErrorInfo{Ename: "KernelDied", Evalue: msg}
	s.markLost("the kernel died during an earlier call")
	if s.k.conn != nil {
		_ = s.k.conn.Close()
	}
}

// collect copies new outputs/ files and the cell's rich outputs to the artifacts dir.
func (s *session) collect(r *Result, col *collector, ex *jupyter.Execution) {
	// A kernel that is gone (a restart after a timeout failed) has nothing to pull.
	if syncer, ok := s.syncer(); ok && s.k.alive() {
		ctx, cancel := context.WithTimeout(s.ctx, s.e.opts.StartTimeout)
		err := syncer.PullOutputs(ctx, s.k.conn, s.ws.Dir(), probeResult(ex))
		cancel()
		if err != nil {
			r.Notes = append(r.Notes, "outputs: pulling files from the kernel failed: "+err.Error())
		}
	}
	arts, err := s.ws.Collect()
	r.Artifacts = append(r.Artifacts, arts...)
	if err != nil {
		r.Notes = append(r.Notes, "artifacts: "+err.Error())
	}
	defer func() {
		var total int64
		for _, a := range r.Artifacts {
			total += a.Size
		}
		if len(r.Artifacts) > 0 {
			s.e.opts.Observer.ArtifactsCollected(len(r.Artifacts), total)
		}
	}()
	prefix := "x"
	if ex != nil {
		prefix = ex.MsgID()
		if len(prefix) > 8 {
			prefix = prefix[:8]
		}
	}
	n := 0
	for _, out := range col.outputs {
		if out.OutputType != "display_data" && out.OutputType != "execute_result" {
			continue
		}
		for _, rich := range richTypes {
			raw, ok := out.Data[rich.mime]
			if !ok {
				continue
			}
			data, ok := richBytes(raw, rich.base64)
			if !ok {
				continue
			}
			n++
			name := fmt.Sprintf("cell%d-%s-%d%s", r.ExecutionCount, prefix, n, rich.ext)
			a, err := s.ws.SaveDisplay(name, data, rich.mime)
			if err != nil {
				r.Notes = append(r.Notes, "display artifact: "+err.Error())
				continue
			}
			r.Artifacts = append(r.Artifacts, a)
		}
	}
}

// syncer returns the session's placement as a FileSyncer, if it is one.
func (s *session) syncer() (FileSyncer, bool) {
	if s.k == nil {
		return nil, false
	}
	fs, ok := s.k.placement.(FileSyncer)
	return fs, ok
}

// probeKey names the FileSyncer's outputs probe in a call's execute_request.
const probeKey = "kernelbox_outputs"

// probeResult returns the outputs probe's result from the call's reply.
func probeResult(ex *jupyter.Execution) json.RawMessage {
	if ex == nil {
		return nil
	}
	reply, err := ex.Reply()
	if err != nil {
		return nil
	}
	return reply.UserExpressions[probeKey]
}

var richTypes = []struct {
	mime, ext string
	base64    bool
}{
	{"image/png", ".png", true},
	{"image/jpeg", ".jpg", true},
	{"image/svg+xml", ".svg", false},
	{"text/html", ".html", false},
}

func richBytes(raw []byte, isBase64 bool) ([]byte, bool) {
	s, ok := jsonText(raw)
	if !ok {
		return nil, false
	}
	if !isBase64 {
		return []byte(s), true
	}
	b, err := base64.StdEncoding.DecodeString(stripNewlines(s))
	return b, err == nil
}

func stripNewlines(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '\n' && s[i] != '\r' {
			b = append(b, s[i])
		}
	}
	return string(b)
}

// stageError classifies a staging failure: bad inputs are the caller's to fix.
func stageError(err error) error {
	for _, bad := range []error{workspace.ErrNotRegular, workspace.ErrDuplicateName, workspace.ErrInvalidName,
		workspace.ErrTooLarge, workspace.ErrSessionLimit} {
		if errors.Is(err, bad) {
			return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
	}
	return fmt.Errorf("stage inputs: %w", err)
}
