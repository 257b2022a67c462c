package jupytertest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/kernelbox/kernelbox/jupyter"
)

// The helpers below send kernel messages whose parent header is the request they
// answer, which is how a client routes them. req may be nil for an empty parent.
// Content may be any value that marshals to a JSON object, or a json.RawMessage.

// Reply sends the reply to req on req's channel (shell or control): an
// execute_request gets an execute_reply, and so on.
func (k *Kernel) Reply(req *jupyter.Message, content any) {
	channel := jupyter.ChannelShell
	if req != nil && req.Channel == jupyter.ChannelControl {
		channel = jupyter.ChannelControl
	}
	msgType := "reply"
	if req != nil {
		msgType = strings.TrimSuffix(req.Type(), "_request") + "_reply"
	}
	k.Send(k.message(channel, msgType, parentOf(req), content, nil))
}

// Status publishes a status message ("busy", "idle", ...) for req and makes the REST
// API report that state.
func (k *Kernel) Status(req *jupyter.Message, state string) {
	k.SetExecutionState(state)
	k.Publish(req, "status", jupyter.StatusContent{ExecutionState: state})
}

// KernelStatus publishes a status message with an empty parent, which is how Jupyter
// Server reports a kernel's death: "restarting" (it is starting a fresh kernel) or
// "dead" (it gave up).
func (k *Kernel) KernelStatus(state string) {
	k.Status(nil, state)
}

// ExecuteInput publishes the execute_input message that echoes req's code.
func (k *Kernel) ExecuteInput(req *jupyter.Message, code string, count int) {
	k.Publish(req, "execute_input", map[string]any{"code": code, "execution_count": count})
}

// Stream publishes stream output ("stdout" or "stderr"). A text larger than the
// client's MaxMessageBytes makes an oversized message.
func (k *Kernel) Stream(req *jupyter.Message, name, text string) {
	k.Publish(req, "stream", jupyter.StreamContent{Name: name, Text: text})
}

// Display publishes display_data with the given MIME bundle.
func (k *Kernel) Display(req *jupyter.Message, data map[string]any) {
	k.Publish(req, "display_data", map[string]any{"data": data, "metadata": map[string]any{}, "transient": map[string]any{}})
}

// Result publishes an execute_result with the given MIME bundle.
func (k *Kernel) Result(req *jupyter.Message, count int, data map[string]any) {
	k.Publish(req, "execute_result", map[string]any{"data": data, "metadata": map[string]any{}, "execution_count": count})
}

// Error publishes an error message.
func (k *Kernel) Error(req *jupyter.Message, ename, evalue string, traceback []string) {
	if traceback == nil {
		traceback = []string{}
	}
	k.Publish(req, "error", jupyter.ErrorContent{Ename: ename, Evalue: evalue, Traceback: traceback})
}

// ClearOutput publishes clear_output.
func (k *Kernel) ClearOutput(req *jupyter.Message, wait bool) {
	k.Publish(req, "clear_output", jupyter.ClearOutputContent{Wait: wait})
}

// Publish sends any iopub message for req. Buffers make it a binary frame in the
// legacy framing, as for widget messages.
func (k *Kernel) Publish(req *jupyter.Message, msgType string, content any, buffers ...[]byte) {
	k.Send(k.message(jupyter.ChannelIOPub, msgType, parentOf(req), content, buffers))
}

// SendForeign sends a message whose parent is a request of some other client, which
// a client must ignore.
func (k *Kernel) SendForeign(channel, msgType string, content any) {
	parent := jupyter.Header{
		MsgID:    uuid.NewString(),
		MsgType:  "execute_request",
		Session:  uuid.NewString(),
		Username: "someone-else",
		Date:     now(),
		Version:  jupyter.ProtocolVersion,
	}
	k.Send(k.message(channel, msgType, parent, content, nil))
}

// message builds a kernel message.
func (k *Kernel) message(channel, msgType string, parent jupyter.Header, content any, buffers [][]byte) *jupyter.Message {
	return &jupyter.Message{
		Channel: channel,
		Header: jupyter.Header{
			MsgID:    uuid.NewString(),
			MsgType:  msgType,
			Session:  k.session,
			Username: "kernel",
			Date:     now(),
			Version:  jupyter.ProtocolVersion,
		},
		ParentHeader: parent,
		Metadata:     json.RawMessage("{}"),
		Content:      mustJSON(content),
		Buffers:      buffers,
	}
}

func parentOf(req *jupyter.Message) jupyter.Header {
	if req == nil {
		return jupyter.Header{}
	}
	return req.Header
}

// mustJSON marshals message content; content that cannot be marshalled is a bug in
// the test script.
func mustJSON(v any) json.RawMessage {
	switch v := v.(type) {
	case nil:
		return json.RawMessage("{}")
	case json.RawMessage:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("jupytertest: content %T: %v", v, err))
	}
	return b
}

// DefaultHandler behaves like a tiny kernel. A kernel_info_request gets a
// kernel_info_reply; an execute_request gets busy, execute_input, its code echoed on
// stdout (unless empty), an ok execute_reply with the next execution count, and idle;
// any other *_request gets an {"status": "ok"} reply inside busy/idle. Other messages
// are ignored.
func DefaultHandler(k *Kernel, req *jupyter.Message) {
	switch t := req.Type(); {
	case t == "kernel_info_request":
		k.Status(req, "busy")
		k.Reply(req, map[string]any{
			"status":                 "ok",
			"protocol_version":       jupyter.ProtocolVersion,
			"implementation":         "jupytertest",
			"implementation_version": "0",
			"language_info":          map[string]any{"name": "python", "version": "3", "mimetype": "text/x-python", "file_extension": ".py"},
			"banner":                 "fake kernel",
		})
		k.Status(req, "idle")
	case t == "execute_request":
		var ex jupyter.ExecuteRequest
		_ = req.DecodeContent(&ex)
		k.Status(req, "busy")
		n := k.NextExecutionCount()
		k.ExecuteInput(req, ex.Code, n)
		if ex.Code != "" {
			k.Stream(req, "stdout", ex.Code)
		}
		k.Reply(req, jupyter.ExecuteReply{Status: "ok", ExecutionCount: n, UserExpressions: map[string]json.RawMessage{}})
		k.Status(req, "idle")
	case strings.HasSuffix(t, "_request"):
		k.Status(req, "busy")
		k.Reply(req, map[string]any{"status": "ok"})
		k.Status(req, "idle")
	}
}

// Stall is a Handler that accepts every message and never answers.
func Stall(*Kernel, *jupyter.Message) {}
