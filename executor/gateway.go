package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/jupyter"
)

// What the Jupyter gateway API (package jupyterapi) needs of a session besides
// calls: a kernel started at once, and messages other than execute_request
// passed to the kernel.

// StartKernel creates session id with a template ("" is the default one), as
// CreateSession does, and starts its kernel (from the template's warm pool when it
// has one) as a job on the session's worker, so that the session is ready when it
// returns. It fails as CreateSession does, and with api.ErrBackend when no kernel
// could be started.
func (e *Executor) StartKernel(ctx context.Context, id, template string) (api.SessionInfo, error) {
	if _, err := e.CreateSession(ctx, id, template); err != nil {
		return api.SessionInfo{}, err
	}
	if err := e.ensureKernelJob(ctx, id); err != nil {
		return api.SessionInfo{}, err
	}
	return e.Session(id)
}

// ensureKernelJob runs ensureKernel as a job on the session's worker.
func (e *Executor) ensureKernelJob(ctx context.Context, id string) error {
	s, err := e.lookup(id)
	if err != nil {
		return err
	}
	j := newJob(ctx, jobFunc, api.Request{SessionID: id}, nil, nil, time.Now())
	j.fn = func(s *session) error { return s.ensureKernel(j) }
	if err := s.enqueue(j); err != nil {
		return err
	}
	_, err = j.wait()
	return err
}

// liveConn returns the session's kernel connection, starting the kernel first
// when the session has none (or its connection has ended).
func (e *Executor) liveConn(ctx context.Context, id string) (*jupyter.Conn, error) {
	for attempt := 0; ; attempt++ {
		s, err := e.lookup(id)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		k := s.kref
		s.mu.Unlock()
		if k != nil && k.conn != nil && k.conn.Err() == nil {
			return k.conn, nil
		}
		if attempt > 0 {
			return nil, fmt.Errorf("%w: session %q has no live kernel connection", api.ErrBackend, id)
		}
		if err := e.ensureKernelJob(ctx, id); err != nil {
			return nil, err
		}
	}
}

// KernelRequest sends a shell or control request (kernel_info_request,
// complete_request, inspect_request, ...) with content, one JSON object, to the
// session's kernel and returns the kernel's reply. It does not wait behind the
// session's calls (the kernel itself may: its shell channel answers in order),
// and starts the session's kernel when it has none. content is not checked: the
// caller bounds and validates what it passes on.
func (e *Executor) KernelRequest(ctx context.Context, id, channel, msgType string, content json.RawMessage) (*jupyter.Message, error) {
	conn, err := e.liveConn(ctx, id)
	if err != nil {
		return nil, err
	}
	m, err := conn.Request(ctx, channel, msgType, content)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", msgType, err)
	}
	return m, nil
}

// KernelSend sends a message that has no reply (comm_open, comm_msg, comm_close)
// to the session's kernel with msg_id msgID (the caller's UUID), starting the
// kernel when it has none. The kernel's messages that answer it (and any other
// message of the kernel's connection that answers no call) go to onMessage, on
// the connection's reader goroutine: it must not block.
func (e *Executor) KernelSend(ctx context.Context, id, msgID, channel, msgType string, content json.RawMessage, onMessage func(*jupyter.Message)) error {
	conn, err := e.liveConn(ctx, id)
	if err != nil {
		return err
	}
	conn.SetUnclaimed(onMessage)
	if err := conn.Send(ctx, msgID, channel, msgType, content); err != nil {
		return fmt.Errorf("%s: %w", msgType, err)
	}
	return nil
}
