package jupyterapi

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
)

// sourceJupyter is the Request.Source of the calls this API runs: execute shows
// them to the kernel's clients itself, so the session's watch skips them.
const sourceJupyter = "jupyter"

// attach adds client c to k and, for its first client, starts watching k's
// session: the calls others run on it (an agent over /v1 or MCP, the CLI) reach
// every client as the iopub messages Jupyter would send for them.
func (k *kernel) attach(g *Gateway, c *client) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopWatch == nil {
		stop, err := g.e.Watch(k.id, k.watched)
		if err != nil {
			return err
		}
		k.stopWatch = stop
	}
	k.clients[c] = true
	return nil
}

// detach removes client c; the last one stops the watch.
func (k *kernel) detach(c *client) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.clients, c)
	if len(k.clients) == 0 && k.stopWatch != nil {
		k.stopWatch()
		k.stopWatch = nil
	}
}

// watched turns a call that someone else runs on the session into iopub
// messages for every client: busy, execute_input with the code, its outputs,
// idle. Their parent is a header kernelbox makes for the call (msg_type
// execute_request, session "kernelbox-watch"): no client sent it.
func (k *kernel) watched(w executor.Watched) {
	if w.Source == sourceJupyter {
		return
	}
	parent := k.callHeader(w.Call)
	switch w.Kind {
	case executor.WatchStart:
		k.broadcast(statusFrame(k, parent, "busy"))
		k.broadcast(frame(k, parent, jupyter.ChannelIOPub, "execute_input",
			map[string]any{"code": w.Code, "execution_count": w.ExecutionCount}))
	case executor.WatchEvent:
		if t, content := iopubOf(w.Event); t != "" {
			k.broadcast(frame(k, parent, jupyter.ChannelIOPub, t, content))
		}
	case executor.WatchEnd:
		if w.Err != nil {
			k.broadcast(frame(k, parent, jupyter.ChannelIOPub, "stream",
				map[string]string{"name": "stderr", "text": "[kernelbox] the call failed: " + w.Err.Error() + "\n"}))
		}
		k.broadcast(statusFrame(k, parent, "idle"))
	case executor.WatchClosed:
		for _, c := range k.clientList() {
			c.drop(closeNormal, "the kernel was shut down: its session was closed")
		}
	}
}

// callHeader is the parent header of the messages of the session's call n.
func (k *kernel) callHeader(n int64) json.RawMessage {
	h, _ := json.Marshal(jupyter.Header{MsgID: fmt.Sprintf("kernelbox-call-%s-%d", k.id, n), MsgType: "execute_request",
		Session: "kernelbox-watch", Username: "kernelbox", Date: time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
		Version: jupyter.ProtocolVersion})
	return h
}

// readOnly reports whether k's clients may only watch: its session was started
// by an agent (through /v1, MCP or the CLI), not through this API, and the
// server does not allow typing into such sessions (Options.AllowTyping).
func (g *Gateway) readOnly(k *kernel) bool {
	return k.agent && !g.o.AllowTyping
}

// readOnlyWhy is the error a watcher gets for what it may not do.
func readOnlyWhy(id string) string {
	return "session " + quote(id) + " belongs to an agent (started through /v1, not /api/kernels): Jupyter clients may watch it, not run code in it, interrupt, restart or shut it down (serve --gateway-allow-typing allows that)"
}

// watcherMay are the requests a read-only client may send: they change nothing.
var watcherMay = map[string]bool{"kernel_info_request": true, "comm_info_request": true}
