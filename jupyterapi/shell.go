package jupyterapi

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/google/uuid"
	"github.com/kernelbox/kernelbox/jupyter"
)

// handle acts on one message from the client. execute_request runs as a
// kernelbox call; requests that have a reply go to the kernel and their reply
// back to this client only; comm messages go to the kernel. Nothing the
// client sends is forwarded as it is: kernelbox builds its own message with
// the client's content, and answers with the client's header as the parent.
func (c *client) handle(m *inMsg) {
	t := m.head.MsgType
	c.g.log.Debug("gateway: message", "kernel_id", c.k.id, "channel", m.Channel, "msg_type", t)
	if (c.g.readOnly(c.k) || c.watchOnly) && m.Channel != jupyter.ChannelStdin && !watcherMay[t] {
		if strings.HasSuffix(t, "_request") {
			// Busy and idle around the reply, as a kernel sends them, to this
			// client only: a notebook marks the cell done at idle.
			c.queue(statusFrame(c.k, m.Header, "busy"))
			c.errorReply(m, "ReadOnly", readOnlyWhy(c.k.id))
			c.queue(statusFrame(c.k, m.Header, "idle"))
		}
		return
	}
	switch {
	case m.Channel == jupyter.ChannelStdin:
		// kernelbox runs every call with allow_stdin false, so no kernel ever
		// waits for an input_reply: one is dropped.
		c.g.log.Debug("gateway: stdin message dropped", "kernel_id", c.k.id, "msg_type", t)
	case t == "execute_request":
		c.spawn(m, c.execute)
	case passThrough[t]:
		c.spawn(m, c.request)
	case t == "comm_open" || t == "comm_msg" || t == "comm_close":
		c.spawn(m, c.send)
	case t == "interrupt_request":
		c.spawn(m, c.interruptRequest)
	case t == "shutdown_request":
		c.spawn(m, c.shutdownRequest)
	case strings.HasSuffix(t, "_request"):
		c.errorReply(m, "UnsupportedMessage", t+" is not supported by kernelbox's gateway")
	default:
		c.g.log.Debug("gateway: message dropped", "kernel_id", c.k.id, "msg_type", t)
	}
}

// passThrough are the requests sent to the kernel with their replies routed back.
var passThrough = map[string]bool{
	"kernel_info_request": true, "complete_request": true, "inspect_request": true,
	"is_complete_request": true, "history_request": true, "comm_info_request": true,
}

// spawn runs fn for m in a goroutine the Gateway waits for, within the
// client's MaxInFlight; past it m is answered with an error reply at once.
func (c *client) spawn(m *inMsg, fn func(*inMsg)) {
	select {
	case c.inflight <- struct{}{}:
	default:
		c.errorReply(m, "TooManyRequests", "this connection already has its limit of requests waiting")
		return
	}
	c.g.work.Add(1)
	go func() {
		defer c.g.work.Done()
		defer func() { <-c.inflight }()
		fn(m)
	}()
}

// request sends a shell or control request to the kernel and its reply to the
// client.
func (c *client) request(m *inMsg) {
	ctx, cancel := context.WithTimeout(context.Background(), c.g.o.RequestTimeout)
	defer cancel()
	reply, err := c.g.e.KernelRequest(ctx, c.k.id, m.Channel, m.head.MsgType, m.Content)
	if err != nil {
		c.errorReply(m, "KernelboxError", err.Error())
		return
	}
	c.queue(relay(reply, m.Header))
}

// send passes a comm message to the kernel; the kernel's messages that
// answer it are routed back (kernel.answer).
func (c *client) send(m *inMsg) {
	ctx, cancel := context.WithTimeout(context.Background(), c.g.o.RequestTimeout)
	defer cancel()
	msgID := uuid.NewString()
	c.k.route(msgID, c, m.Header)
	if err := c.g.e.KernelSend(ctx, c.k.id, msgID, m.Channel, m.head.MsgType, m.Content, c.k.answer); err != nil {
		c.g.log.Debug("gateway: comm message not sent", "kernel_id", c.k.id, "err", err)
	}
}

func (c *client) interruptRequest(m *inMsg) {
	ctx, cancel := context.WithTimeout(context.Background(), c.g.o.RequestTimeout)
	defer cancel()
	if err := c.g.e.Interrupt(ctx, c.k.id); err != nil {
		c.errorReply(m, "KernelboxError", err.Error())
		return
	}
	c.queue(frame(c.k, m.Header, m.Channel, "interrupt_reply", map[string]string{"status": "ok"}))
}

// shutdownRequest restarts (restart: true) or shuts down the kernel, as the
// REST routes do; a shutdown closes the session and its clients.
func (c *client) shutdownRequest(m *inMsg) {
	var body struct {
		Restart bool `json:"restart"`
	}
	_ = json.Unmarshal(m.Content, &body)
	ctx, cancel := context.WithTimeout(context.Background(), c.g.o.RequestTimeout*4)
	defer cancel()
	id := c.k.id
	var err error
	if body.Restart {
		if err = c.g.e.Interrupt(ctx, id); err == nil {
			err = c.g.e.ResetSession(ctx, id)
		}
	} else {
		err = c.g.e.CloseSession(ctx, id)
	}
	if err != nil {
		c.errorReply(m, "KernelboxError", err.Error())
		return
	}
	reply := map[string]any{"status": "ok", "restart": body.Restart}
	c.queue(frame(c.k, m.Header, m.Channel, "shutdown_reply", reply))
	c.k.broadcast(frame(c.k, m.Header, jupyter.ChannelIOPub, "shutdown_reply", reply))
	if !body.Restart {
		c.g.mu.Lock()
		delete(c.g.kernels, id)
		c.g.mu.Unlock()
		for _, o := range c.k.clientList() {
			o.drop(closeNormal, "the kernel was shut down")
		}
	}
}

// errorReply answers a request with its reply type and status error.
func (c *client) errorReply(m *inMsg, ename, evalue string) {
	t := strings.TrimSuffix(m.head.MsgType, "_request") + "_reply"
	c.queue(frame(c.k, m.Header, m.Channel, t, map[string]any{
		"status": "error", "ename": ename, "evalue": evalue, "traceback": []string{},
	}))
}
