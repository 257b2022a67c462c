package executor_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/jupyter/jupytertest"
)

// fakeScript makes jupytertest kernels behave enough like IPython for the executor:
// a cell is lines of commands, run in order.
//
//	set NAME VALUE   store a variable (the kernel's state)
//	get NAME         the variable as the cell's result, or a NameError
//	print TEXT       TEXT on stdout
//	raise            a ValueError
//	png | gif | html a display of that type (with a text/plain form)
//	sleep DURATION   the cell runs that long; an interrupt stops it (KeyboardInterrupt)
//	hang             the cell runs until the kernel is restarted; interrupts are ignored
//	die              the kernel dies ("restarting"): its state is lost
//	dropreply        the cell ends idle without an execute_reply (ipykernel's
//	                 answer to a KeyboardInterrupt in its own code)
//	drop             the WebSocket drops and re-dials are refused (503) until the
//	                 test calls Refuse(0): the kernel and its state live on
//
// sleep, hang, die and drop end the cell. A restart (REST) loses the state and
// abandons a running cell, as a real restart does.
type fakeScript struct {
	mu      sync.Mutex
	kernels map[*jupytertest.Kernel]*fakeKernel
	// saveDelay, when set, is how long a snapshot save takes before it writes
	// (as an 80 MB namespace's does); the cell is busy until then.
	saveDelay time.Duration
	// preamble, when set, is how long the kernel handles an execute request
	// before the cell's code starts (its busy status and execute_input come
	// after it). An interrupt that arrives then drops the request's reply: the
	// kernel goes idle without answering, as ipykernel 6.17 does when a
	// KeyboardInterrupt lands in its own code rather than the cell's.
	preamble time.Duration
}

// fakeKernel is one kernel's state.
type fakeKernel struct {
	restarts int // k.Restarts() when vars were last valid
	vars     map[string]string
	running  *fakeCell
	pre      *fakePre // the request in its preamble
}

// fakePre is an execute request in its preamble (fakeScript.preamble).
type fakePre struct{ lost bool }

// fakeCell is a cell that has not ended yet.
type fakeCell struct {
	req           *jupyter.Message
	count         int
	interruptible bool
	timer         *time.Timer
}

func newFakeScript() *fakeScript {
	return &fakeScript{kernels: map[*jupytertest.Kernel]*fakeKernel{}}
}

// state returns k's state, reset if the kernel was restarted since it was last seen.
// Called with s.mu held.
func (s *fakeScript) state(k *jupytertest.Kernel) *fakeKernel {
	fk := s.kernels[k]
	if fk == nil || fk.restarts != k.Restarts() {
		if fk != nil && fk.running != nil && fk.running.timer != nil {
			fk.running.timer.Stop()
		}
		fk = &fakeKernel{restarts: k.Restarts(), vars: map[string]string{}}
		s.kernels[k] = fk
	}
	return fk
}

// handle is the kernels' jupytertest.Handler.
func (s *fakeScript) handle(k *jupytertest.Kernel, req *jupyter.Message) {
	if req.Type() != "execute_request" {
		jupytertest.DefaultHandler(k, req)
		return
	}
	if s.preamble > 0 {
		s.mu.Lock()
		fk := s.state(k)
		p := &fakePre{}
		fk.pre = p
		s.mu.Unlock()
		time.AfterFunc(s.preamble, func() {
			s.mu.Lock()
			lost := p.lost
			if fk.pre == p {
				fk.pre = nil
			}
			s.mu.Unlock()
			if lost { // "KeyboardInterrupt caught in kernel."
				k.Status(req, "busy")
				k.Status(req, "idle")
				return
			}
			s.run(k, req)
		})
		return
	}
	s.run(k, req)
}

// run runs an execute request's cell.
func (s *fakeScript) run(k *jupytertest.Kernel, req *jupyter.Message) {
	var ex jupyter.ExecuteRequest
	_ = req.DecodeContent(&ex)
	s.mu.Lock()
	defer s.mu.Unlock()
	fk := s.state(k)
	k.Status(req, "busy")
	count := 0
	if !ex.Silent {
		count = k.NextExecutionCount()
		k.ExecuteInput(req, ex.Code, count)
	}
	if strings.HasPrefix(ex.Code, "exec(") && s.saveDelay > 0 && strings.Contains(ex.Code, "_kb_save") {
		time.AfterFunc(s.saveDelay, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			fk.snapshot(k, req, ex.Code)
			s.ok(k, req, count, nil)
		})
		return
	}
	if strings.HasPrefix(ex.Code, "exec(") {
		fk.snapshot(k, req, ex.Code)
		s.ok(k, req, count, nil)
		return
	}
	for _, line := range strings.Split(ex.Code, "\n") {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch cmd {
		case "set":
			name, value, _ := strings.Cut(arg, " ")
			fk.vars[name] = value
		case "get":
			v, ok := fk.vars[arg]
			if !ok {
				s.fail(k, req, count, "NameError", "name '"+arg+"' is not defined")
				return
			}
			k.Result(req, count, map[string]any{"text/plain": v})
		case "print":
			k.Stream(req, "stdout", arg+"\n")
		case "raise":
			s.fail(k, req, count, "ValueError", "raised by the script")
			return
		case "png", "gif":
			img := base64.StdEncoding.EncodeToString([]byte("fake " + cmd + " bytes"))
			k.Display(req, map[string]any{"image/" + cmd: img, "text/plain": "<Figure>"})
		case "html":
			k.Display(req, map[string]any{"text/html": "<b>fake</b>", "text/plain": "<HTML>"})
		case "sleep":
			d, _ := time.ParseDuration(arg)
			c := &fakeCell{req: req, count: count, interruptible: true}
			c.timer = time.AfterFunc(d, func() { s.finish(k, c, ex.UserExpressions) })
			fk.running = c
			return
		case "hang":
			fk.running = &fakeCell{req: req, count: count}
			return
		case "die":
			k.KernelStatus("restarting")
			delete(s.kernels, k)
			k.SetExecutionState("idle") // the server restarted it
			return
		case "dropreply":
			k.Status(req, "idle")
			return
		case "drop":
			k.Refuse(http.StatusServiceUnavailable)
			k.DropConnection()
			return
		}
	}
	s.ok(k, req, count, ex.UserExpressions)
}

// ok ends a cell with an ok reply, answering the outputs probe if it was asked.
func (s *fakeScript) ok(k *jupytertest.Kernel, req *jupyter.Message, count int, exprs map[string]string) {
	values := map[string]json.RawMessage{}
	for key, expr := range exprs {
		switch expr {
		case fakeProbeExpr:
			values[key] = json.RawMessage(`{"status": "ok", "data": {"text/plain": "'changed'"}, "metadata": {}}`)
		case "get_ipython().execution_count": // IPython's: the count the next stored call gets
			values[key] = json.RawMessage(fmt.Sprintf(`{"status": "ok", "data": {"text/plain": "%d"}, "metadata": {}}`, k.ExecutionCount()+1))
		}
	}
	k.Reply(req, jupyter.ExecuteReply{Status: "ok", ExecutionCount: count, UserExpressions: values})
	k.Status(req, "idle")
}

// fail ends a cell with an exception: an error output and an error reply (whose
// user expressions are not evaluated, as in IPython).
func (s *fakeScript) fail(k *jupytertest.Kernel, req *jupyter.Message, count int, ename, evalue string) {
	tb := []string{"\x1b[0;31m" + ename + "\x1b[0m: " + evalue}
	k.Error(req, ename, evalue, tb)
	k.Reply(req, jupyter.ExecuteReply{Status: "error", ExecutionCount: count, Ename: ename, Evalue: evalue, Traceback: tb})
	k.Status(req, "idle")
}

// finish ends a sleeping cell that is still k's running cell.
func (s *fakeScript) finish(k *jupytertest.Kernel, c *fakeCell, exprs map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fk := s.kernels[k]
	if fk == nil || fk.running != c || fk.restarts != k.Restarts() {
		return
	}
	fk.running = nil
	s.ok(k, c.req, c.count, exprs)
}

// interrupt is the servers' OnInterrupt: a sleeping cell ends with a
// KeyboardInterrupt; a hanging one ignores it; a request in its preamble loses
// its reply.
func (s *fakeScript) interrupt(k *jupytertest.Kernel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fk := s.kernels[k]
	if fk != nil && fk.pre != nil && fk.restarts == k.Restarts() {
		fk.pre.lost = true
		return
	}
	if fk == nil || fk.running == nil || !fk.running.interruptible || fk.restarts != k.Restarts() {
		return
	}
	c := fk.running
	fk.running = nil
	c.timer.Stop()
	s.fail(k, c.req, c.count, "KeyboardInterrupt", "")
}

// running reports whether k runs a sleeping or hanging cell.
func (s *fakeScript) running(k *jupytertest.Kernel) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	fk := s.kernels[k]
	return fk != nil && fk.running != nil && fk.restarts == k.Restarts()
}

// stop stops the timers of running cells.
func (s *fakeScript) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, fk := range s.kernels {
		if fk.running != nil && fk.running.timer != nil {
			fk.running.timer.Stop()
		}
	}
}
