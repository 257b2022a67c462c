package jupyter

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Calls: Request and Execute register one, the reader completes it, and Close or
// a lost connection fails it.

// call is one request waiting for its answer.
type call struct {
	id      string
	execute bool
	msgs    chan *Message // execute only: output messages
	// queued counts the bytes of the messages in msgs, and taken is signalled
	// when Next takes one: the reader stops reading (and so the server stops
	// sending) while more than maxQueuedBytes wait, so that a cell printing
	// gigabytes cannot fill memory with messages nobody has read yet.
	queued atomic.Int64
	taken  chan struct{}
	gone   chan struct{} // closed when the caller abandons the call
	done   chan struct{} // closed on completion or failure
	once   sync.Once

	// started is set by the reader when the kernel shows it took the request (its
	// busy status or execute_input): a kernel that dies before then never ran it.
	started atomic.Bool
	// inCode is set by the reader from the request's execute_input until its
	// reply or idle status: the kernel is inside the request's handler (see
	// Execution.InCode).
	inCode atomic.Bool
	// lostTimer, set by the reader at an idle status that came before the reply,
	// ends the call with ErrReplyLost if the reply does not follow (replyLostAfter).
	lostTimer *time.Timer

	// written by the reader goroutine before done is closed
	reply *Message
	idle  bool
	err   error
}

func (c *call) finish(err error) {
	c.once.Do(func() {
		c.err = err
		close(c.done)
	})
}

// register adds a call for msgID, failing when the connection has stopped.
func (c *Conn) register(cl *call) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.pending[cl.id] = cl
	return nil
}

func (c *Conn) unregister(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *Conn) complete(cl *call) {
	c.unregister(cl.id)
	if cl.lostTimer != nil {
		cl.lostTimer.Stop()
	}
	cl.finish(nil)
}

// replyLostAfter is how long an execution whose idle status has arrived waits for
// its execute_reply before it ends with ErrReplyLost. A kernel sends the reply
// before the idle status; the two travel on different channels, so the idle may be
// read first, but by microseconds, not seconds.
const replyLostAfter = 3 * time.Second

// awaitReply arms cl's lost-reply timer: the kernel went idle without answering.
// Called by the reader.
func (c *Conn) awaitReply(cl *call) {
	cl.lostTimer = time.AfterFunc(replyLostAfter, func() {
		c.mu.Lock()
		mine := c.pending[cl.id] == cl
		if mine {
			delete(c.pending, cl.id)
		}
		c.mu.Unlock()
		if mine {
			cl.finish(fmt.Errorf("%w: the kernel went idle %s ago without answering execute_request %s", ErrReplyLost, replyLostAfter, cl.id))
		}
	})
}

// anyPending reports whether any of calls is still waiting.
func (c *Conn) anyPending(calls []*call) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range calls {
		if c.pending[cl.id] == cl {
			return true
		}
	}
	return false
}

// Request sends a request on the shell or control channel and waits for its reply.
// content is encoded with encoding/json, except a json.RawMessage, which is sent
// as it is and must be one valid JSON object, and a *Base64Content, whose
// payload is encoded as it is written to the socket.
func (c *Conn) Request(ctx context.Context, channel, msgType string, content any) (*Message, error) {
	m, err := newMessage(c.opts.SessionID, channel, msgType, content)
	if err != nil {
		return nil, err
	}
	cl := &call{id: m.Header.MsgID, gone: make(chan struct{}), done: make(chan struct{})}
	if err := c.register(cl); err != nil {
		return nil, err
	}
	defer c.unregister(cl.id)
	if err := c.send(ctx, m); err != nil {
		return nil, err
	}
	select {
	case <-cl.done:
		if cl.err != nil {
			return nil, cl.err
		}
		return cl.reply, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", msgType, ctx.Err())
	}
}

// KernelInfo asks the kernel for its kernel_info_reply; a reply means the kernel is
// up and its channels are connected.
func (c *Conn) KernelInfo(ctx context.Context) (*Message, error) {
	return c.Request(ctx, ChannelShell, "kernel_info_request", struct{}{})
}
