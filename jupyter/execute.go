package jupyter

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// Execution is one execute_request in flight. Read its output with Next until it
// returns io.EOF (complete) or another error, then call Close. Next may be called again
// after it returned a context error: the execution goes on until the kernel finishes,
// dies or is interrupted. An Execution is used by one goroutine at a time.
type Execution struct {
	conn  *Conn
	call  *call
	close sync.Once

	// the execute_reply, decoded once (Reply is asked several times per call)
	decode   sync.Once
	reply    *ExecuteReply
	replyErr error
}

// Execute sends an execute_request for code and returns the execution in flight.
// allow_stdin is always false.
func (c *Conn) Execute(ctx context.Context, req ExecuteRequest) (*Execution, error) {
	req.AllowStdin = false
	if req.UserExpressions == nil {
		req.UserExpressions = map[string]string{}
	}
	m, err := newMessage(c.opts.SessionID, ChannelShell, "execute_request", req)
	if err != nil {
		return nil, err
	}
	cl := &call{
		id:      m.Header.MsgID,
		execute: true,
		msgs:    make(chan *Message, 64),
		taken:   make(chan struct{}, 1),
		gone:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	if err := c.register(cl); err != nil {
		return nil, err
	}
	if err := c.send(ctx, m); err != nil {
		c.unregister(cl.id)
		return nil, err
	}
	return &Execution{conn: c, call: cl}, nil
}

// Started reports whether the kernel has shown that it took the request (a busy
// status or the execute_input with this request as parent). An execution that
// failed before it started never ran its code.
func (e *Execution) Started() bool { return e.call.started.Load() }

// InCode reports whether the kernel is inside the request's handler: its
// execute_input (or, for a silent request, which has none, its first output) has
// arrived and neither its reply nor its idle status yet. That is
// the only time an interrupt is safe: ipykernel (6.17, Debian's) takes SIGINT as a
// KeyboardInterrupt from the moment it begins handling any request to the moment
// it ends, and one that lands in its own code rather than the cell's drops that
// request's reply (the execution then ends with ErrReplyLost) or, in a window at
// the handler's start, stops the kernel's shell channel for good. An interrupt of
// a kernel between requests is ignored.
func (e *Execution) InCode() bool { return e.call.inCode.Load() }

// MsgID returns the request's msg_id, the parent id of every message it causes.
func (e *Execution) MsgID() string { return e.call.id }

// Next returns the next output message of the execution: stream, display_data,
// update_display_data, execute_result, error, clear_output, or another iopub message
// whose parent is this request (status and execute_input are consumed). It returns
// io.EOF once both the execute_reply and the "idle" status have arrived and every
// output before them was returned; an error wrapping ErrKernelDied,
// ErrConnectionLost or ErrClosed when the execution failed; or ctx's error.
func (e *Execution) Next(ctx context.Context) (*Message, error) {
	select {
	case m := <-e.call.msgs:
		return e.took(m), nil
	default:
	}
	select {
	case m := <-e.call.msgs:
		return e.took(m), nil
	case <-e.call.done:
		select {
		case m := <-e.call.msgs:
			return e.took(m), nil
		default:
		}
		if e.call.err != nil {
			return nil, e.call.err
		}
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// took releases m's bytes from the queue bound and wakes a reader waiting on it.
func (e *Execution) took(m *Message) *Message {
	e.call.queued.Add(-m.size())
	select {
	case e.call.taken <- struct{}{}:
	default:
	}
	return m
}

// Done is closed when the execution has completed or failed.
func (e *Execution) Done() <-chan struct{} { return e.call.done }

// Reply returns the decoded execute_reply once Next has returned io.EOF, else nil.
func (e *Execution) Reply() (*ExecuteReply, error) {
	select {
	case <-e.call.done:
	default:
		return nil, fmt.Errorf("execution %s has not completed", e.call.id)
	}
	if e.call.err != nil {
		return nil, e.call.err
	}
	e.decode.Do(func() {
		var r ExecuteReply
		if err := e.call.reply.DecodeContent(&r); err != nil {
			e.replyErr = fmt.Errorf("decode execute_reply: %w", err)
			return
		}
		e.reply = &r
	})
	return e.reply, e.replyErr
}

// Close abandons the execution if it is still running: later messages for it are
// dropped, and Next, once it has returned what had already arrived, fails with an
// error wrapping ErrClosed instead of waiting for them. The kernel is not
// interrupted. Close is idempotent.
func (e *Execution) Close() {
	e.close.Do(func() {
		close(e.call.gone)
		e.conn.unregister(e.call.id)
		e.call.finish(fmt.Errorf("execution %s: %w", e.call.id, ErrClosed)) // no-op if it completed
	})
}

// Run executes code and calls onOutput for each output message as it arrives; it
// returns the execute_reply. It is the simple form of Execute for callers that need no
// control over timeouts beyond ctx.
func (c *Conn) Run(ctx context.Context, code string, onOutput func(*Message)) (*ExecuteReply, error) {
	ex, err := c.Execute(ctx, ExecuteRequest{Code: code, StoreHistory: true})
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	for {
		m, err := ex.Next(ctx)
		if err == io.EOF {
			return ex.Reply()
		}
		if err != nil {
			return nil, err
		}
		if onOutput != nil {
			onOutput(m)
		}
	}
}
