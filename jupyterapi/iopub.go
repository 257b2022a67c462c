package jupyterapi

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/jupyter"
)

// executeContent is the part of an execute_request kernelbox reads. Other
// fields (silent, user_expressions, allow_stdin, ...) are not passed on: the
// executor runs every call the same way (allow_stdin false).
type executeContent struct {
	Code string `json:"code"`
}

// execute runs an execute_request as a kernelbox call: its iopub messages go
// to every client of the kernel, as Jupyter's do, and the execute_reply to
// this client. The call is not tied to the WebSocket: a client that goes away
// does not interrupt it; the server's timeout policy bounds it.
func (c *client) execute(m *inMsg) {
	var req executeContent
	if err := json.Unmarshal(m.Content, &req); err != nil {
		c.errorReply(m, "KernelboxError", "execute_request content: "+err.Error())
		return
	}
	k, parent := c.k, m.Header
	info, err := c.g.e.Session(k.id)
	if err != nil {
		// The session was closed (DELETE, an idle timeout): a call would make
		// a new session of that id, behind the client's back.
		c.errorReply(m, "KernelboxError", "the kernel's session was closed ("+err.Error()+"); start a new kernel")
		c.drop(closeGoingAway, "the kernel's session was closed")
		return
	}
	k.broadcast(statusFrame(k, parent, "busy"))
	defer k.broadcast(statusFrame(k, parent, "idle"))
	if strings.TrimSpace(req.Code) == "" {
		c.queue(frame(k, parent, m.Channel, "execute_reply", okReply(info.ExecutionCount)))
		return
	}
	k.broadcast(frame(k, parent, jupyter.ChannelIOPub, "execute_input",
		map[string]any{"code": req.Code, "execution_count": info.ExecutionCount + 1}))
	sawError := false
	res, err := c.g.e.ExecuteStream(context.Background(), api.Request{SessionID: k.id, Template: info.Template, Code: req.Code, Source: sourceJupyter, Comms: true}, func(ev api.Event) {
		if t, content := iopubOf(ev); t != "" {
			sawError = sawError || t == "error"
			k.broadcast(frame(k, parent, jupyter.ChannelIOPub, t, content))
		}
	})
	var reply map[string]any
	switch {
	case err != nil && (res == nil || !errors.Is(err, api.ErrDenied)):
		ename := "KernelboxError"
		if code, _ := api.CodeOf(err); code != "" {
			ename = "KernelboxError: " + string(code)
		}
		reply = errReply(info.ExecutionCount, ename, err.Error(), nil)
		k.broadcast(frame(k, parent, jupyter.ChannelIOPub, "error", errContent(ename, err.Error(), nil)))
	case res.Status == api.StatusOK:
		reply = okReply(res.ExecutionCount)
	default:
		e := res.Error
		if e == nil {
			e = &api.ErrorInfo{Ename: string(res.Status)}
		}
		if !sawError {
			k.broadcast(frame(k, parent, jupyter.ChannelIOPub, "error", errContent(e.Ename, e.Evalue, e.Traceback)))
		}
		reply = errReply(res.ExecutionCount, e.Ename, e.Evalue, e.Traceback)
	}
	if res != nil && (res.StateLost || res.Truncated) {
		notes := append([]string{}, res.Notes...)
		if res.TruncationNote != "" {
			notes = append(notes, res.TruncationNote)
		}
		k.broadcast(frame(k, parent, jupyter.ChannelIOPub, "stream",
			map[string]string{"name": "stderr", "text": "[kernelbox] " + strings.Join(notes, "\n[kernelbox] ") + "\n"}))
	}
	c.queue(frame(k, parent, m.Channel, "execute_reply", reply))
}

func okReply(count int) map[string]any {
	return map[string]any{"status": "ok", "execution_count": count, "user_expressions": map[string]any{}, "payload": []any{}}
}

func errReply(count int, ename, evalue string, tb []string) map[string]any {
	r := errContent(ename, evalue, tb)
	r["status"], r["execution_count"] = "error", count
	return r
}

func errContent(ename, evalue string, tb []string) map[string]any {
	if tb == nil {
		tb = []string{}
	}
	return map[string]any{"ename": ename, "evalue": evalue, "traceback": tb}
}

// iopubOf returns the iopub message type and content of a call's event, or ""
// for an event Jupyter has no message for (kernelbox's own statuses).
func iopubOf(ev api.Event) (string, any) {
	o := ev.Output
	switch ev.Type {
	case "stream":
		return "stream", map[string]string{"name": ev.Name, "text": ev.Text}
	case "clear_output":
		return "clear_output", map[string]bool{"wait": ev.Wait}
	case "comm":
		// A widget the cell displays: its comm messages, as the kernel sent them.
		return ev.MsgType, ev.Comm
	}
	if o == nil {
		return "", nil
	}
	display := func(t string) (string, any) {
		c := map[string]any{"data": nonNil(o.Data), "metadata": nonNil(o.Metadata)}
		if o.DisplayID != "" {
			c["transient"] = map[string]string{"display_id": o.DisplayID}
		}
		if t == "execute_result" {
			c["execution_count"] = o.ExecutionCount
		}
		return t, c
	}
	switch ev.Type {
	case "display":
		return display("display_data")
	case "update_display":
		return display("update_display_data")
	case "result":
		return display("execute_result")
	case "error":
		return "error", errContent(o.Ename, o.Evalue, o.Traceback)
	}
	return "", nil
}

func nonNil(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return map[string]json.RawMessage{}
	}
	return m
}
