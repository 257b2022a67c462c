package jupyter_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/jupyter/jupytertest"
	"github.com/stretchr/testify/require"
)

// TestExecuteCompletion checks that an execution completes whether the execute_reply
// or the idle status comes first, with every output delivered in order before io.EOF,
// and that messages for other requests are ignored.
func TestExecuteCompletion(t *testing.T) {
	t.Parallel()
	outputs := func(k *jupytertest.Kernel, req *jupyter.Message) {
		k.Stream(req, "stdout", "a")
		k.SendForeign(jupyter.ChannelIOPub, "stream", jupyter.StreamContent{Name: "stdout", Text: "foreign"})
		k.Display(req, map[string]any{"text/plain": "d"})
		k.Stream(req, "stderr", "b")
		k.ClearOutput(req, true)
		k.Error(req, "ValueError", "v", nil)
		k.Result(req, 1, map[string]any{"text/plain": "r"})
	}
	want := []string{"stream:stdout:a", `display_data:"d"`, "stream:stderr:b", "clear_output", "error:ValueError", `execute_result:"r"`}
	for _, tc := range []struct {
		name   string
		script func(k *jupytertest.Kernel, req *jupyter.Message)
	}{
		{"reply-then-idle", func(k *jupytertest.Kernel, req *jupyter.Message) {
			k.Status(req, "busy")
			outputs(k, req)
			k.Reply(req, okReply(1))
			k.Status(req, "idle")
		}},
		{"idle-then-reply", func(k *jupytertest.Kernel, req *jupyter.Message) {
			k.Status(req, "busy")
			outputs(k, req)
			k.Status(req, "idle")
			k.Reply(req, okReply(1))
		}},
		{"foreign-reply-and-idle-interleaved", func(k *jupytertest.Kernel, req *jupyter.Message) {
			k.Status(req, "busy")
			outputs(k, req)
			k.SendForeign(jupyter.ChannelShell, "execute_reply", okReply(7))
			k.SendForeign(jupyter.ChannelIOPub, "status", jupyter.StatusContent{ExecutionState: "idle"})
			k.Reply(req, okReply(1))
			k.SendForeign(jupyter.ChannelIOPub, "stream", jupyter.StreamContent{Name: "stdout", Text: "late"})
			k.Status(req, "idle")
		}},
		{"many-outputs-past-the-channel-buffer", func(k *jupytertest.Kernel, req *jupyter.Message) {
			k.Status(req, "busy")
			for range 100 {
				k.Stream(req, "stdout", "x")
			}
			outputs(k, req)
			k.Status(req, "idle")
			k.Reply(req, okReply(1))
		}},
	} {
		for _, proto := range []jupyter.Protocol{jupyter.ProtocolLegacy, jupyter.ProtocolV1} {
			t.Run(tc.name+"/"+proto.String(), func(t *testing.T) {
				t.Parallel()
				h := func(k *jupytertest.Kernel, req *jupyter.Message) {
					if req.Type() != "execute_request" {
						jupytertest.DefaultHandler(k, req)
						return
					}
					tc.script(k, req)
				}
				f := newFake(t, nil, h, &jupyter.ConnOptions{Protocol: proto})
				out, err := drain(t, execute(t, f.conn, "x"))
				require.NoError(t, err)
				got := summary(t, out)
				if len(got) > len(want) {
					for _, s := range got[:len(got)-len(want)] {
						require.Equal(t, "stream:stdout:x", s)
					}
					got = got[len(got)-len(want):]
				}
				require.Equal(t, want, got)

				// A second execution on the same connection works.
				f.kernel.SetHandler(nil)
				r, err := f.conn.Run(testCtx(t), "print(1)", nil)
				require.NoError(t, err)
				require.Equal(t, "ok", r.Status)
			})
		}
	}
}

func TestExecuteReply(t *testing.T) {
	t.Parallel()
	h, reqs := capture()
	f := newFake(t, nil, h, nil)
	ex := execute(t, f.conn, "y")
	req := recv(t, reqs)
	_, err := ex.Reply()
	require.Error(t, err, "Reply before completion")
	f.kernel.Status(req, "busy")
	f.kernel.Error(req, "NameError", "name 'y' is not defined", []string{"tb"})
	f.kernel.Reply(req, jupyter.ExecuteReply{Status: "error", ExecutionCount: 3, Ename: "NameError", Evalue: "name 'y' is not defined", Traceback: []string{"tb"}})
	f.kernel.Status(req, "idle")
	out, err := drain(t, ex)
	require.NoError(t, err)
	require.Equal(t, []string{"error:NameError"}, summary(t, out))
	r, err := ex.Reply()
	require.NoError(t, err)
	require.Equal(t, "error", r.Status)
	require.Equal(t, 3, r.ExecutionCount)
	require.Equal(t, "NameError", r.Ename)

	// The request the fake saw: allow_stdin is always false, whatever the caller said.
	seen := make(chan jupyter.ExecuteRequest, 1)
	f.kernel.SetHandler(func(k *jupytertest.Kernel, req *jupyter.Message) {
		var c jupyter.ExecuteRequest
		_ = req.DecodeContent(&c)
		seen <- c
		jupytertest.DefaultHandler(k, req)
	})
	ex, err = f.conn.Execute(testCtx(t), jupyter.ExecuteRequest{Code: "input()", AllowStdin: true})
	require.NoError(t, err)
	defer ex.Close()
	_, err = drain(t, ex)
	require.NoError(t, err)
	got := <-seen
	require.False(t, got.AllowStdin)
	require.Equal(t, "input()", got.Code)
	require.NotNil(t, got.UserExpressions)
}

// TestNextCanceled checks that a canceled Next returns the context's error and leaves
// the execution running: a later Next still gets its outputs and completion.
func TestNextCanceled(t *testing.T) {
	t.Parallel()
	h, reqs := capture()
	f := newFake(t, nil, h, nil)
	ex := execute(t, f.conn, "slow()")
	req := recv(t, reqs)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ex.Next(ctx)
	require.ErrorIs(t, err, context.Canceled)

	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = ex.Next(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	f.kernel.Status(req, "busy")
	f.kernel.Stream(req, "stdout", "done")
	f.kernel.Reply(req, okReply(1))
	f.kernel.Status(req, "idle")
	out, err := drain(t, ex)
	require.NoError(t, err)
	require.Equal(t, []string{"stream:stdout:done"}, summary(t, out))
}

// TestExecutionCloseUnblocksReader checks that an abandoned execution whose kernel
// keeps sending more than the per-call buffer holds does not block the connection's
// reader: later calls still work.
func TestExecutionCloseUnblocksReader(t *testing.T) {
	t.Parallel()
	h, reqs := capture()
	f := newFake(t, nil, h, nil)
	ex := execute(t, f.conn, "flood()")
	req := recv(t, reqs)

	const n = 300 // well past the 64 outputs an execution buffers
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		f.kernel.Status(req, "busy")
		for i := range n {
			f.kernel.Stream(req, "stdout", fmt.Sprint(i))
		}
	}()
	m, err := ex.Next(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, []string{"stream:stdout:0"}, summary(t, []*jupyter.Message{m}))

	// While nobody reads the execution, its outputs hold up the connection's reader
	// (backpressure): a reply sent after them cannot be read yet.
	<-sent
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = f.conn.KernelInfo(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// Abandoning the execution releases the reader; its later messages are dropped.
	ex.Close()
	require.NoError(t, ctxErr(f.conn.KernelInfo(testCtx(t))))
	f.kernel.Stream(req, "stdout", "after close")
	f.kernel.Reply(req, okReply(1))
	f.kernel.Status(req, "idle")

	f.kernel.SetHandler(nil)
	var got []*jupyter.Message
	_, err = f.conn.Run(testCtx(t), "next", func(m *jupyter.Message) { got = append(got, m) })
	require.NoError(t, err)
	require.Equal(t, []string{"stream:stdout:next"}, summary(t, got))
	// Next after Close returns what was already buffered, then fails instead of
	// waiting for messages that are now dropped.
	for {
		_, err = ex.Next(testCtx(t))
		if err != nil {
			break
		}
	}
	require.ErrorIs(t, err, jupyter.ErrClosed)
}

// ctxErr drops the value of a (value, error) pair.
func ctxErr(_ any, err error) error { return err }

// TestConnCloseFailsCalls checks that Close fails calls in flight with ErrClosed and
// returns, and that later calls fail at once.
func TestConnCloseFailsCalls(t *testing.T) {
	t.Parallel()
	f := newFake(t, nil, jupytertest.Stall, nil)
	ex := execute(t, f.conn, "1")
	reqErr := make(chan error, 1)
	go func() {
		_, err := f.conn.KernelInfo(context.Background())
		reqErr <- err
	}()
	require.Eventually(t, func() bool { return len(f.kernel.Sessions()) == 1 }, testTimeout, tick)
	time.Sleep(20 * time.Millisecond) // let the kernel_info_request be sent

	closed := make(chan error, 1)
	go func() { closed <- f.conn.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung")
	}
	<-f.conn.Done()
	require.ErrorIs(t, f.conn.Err(), jupyter.ErrClosed)

	_, err := drain(t, ex)
	require.ErrorIs(t, err, jupyter.ErrClosed)
	require.ErrorIs(t, <-reqErr, jupyter.ErrClosed)

	_, err = f.conn.Execute(testCtx(t), jupyter.ExecuteRequest{Code: "1"})
	require.ErrorIs(t, err, jupyter.ErrClosed)
	_, err = f.conn.KernelInfo(testCtx(t))
	require.ErrorIs(t, err, jupyter.ErrClosed)
	require.NoError(t, f.conn.Close(), "a second Close")
}

func TestRequest(t *testing.T) {
	t.Parallel()
	controls := make(chan *jupyter.Message, 1)
	f := newFake(t, nil, func(k *jupytertest.Kernel, req *jupyter.Message) {
		if req.Channel == jupyter.ChannelControl {
			controls <- req
		}
		jupytertest.DefaultHandler(k, req)
	}, nil)
	ctx := testCtx(t)

	info, err := f.conn.KernelInfo(ctx)
	require.NoError(t, err)
	require.Equal(t, "kernel_info_reply", info.Type())
	require.Equal(t, jupyter.ChannelShell, info.Channel)
	var c struct {
		Status         string `json:"status"`
		Implementation string `json:"implementation"`
	}
	require.NoError(t, info.DecodeContent(&c))
	require.Equal(t, "ok", c.Status)
	require.Equal(t, "jupytertest", c.Implementation)

	r, err := f.conn.Request(ctx, jupyter.ChannelControl, "shutdown_request", map[string]bool{"restart": false})
	require.NoError(t, err)
	require.Equal(t, "shutdown_reply", r.Type())
	require.Equal(t, jupyter.ChannelControl, r.Channel)
	got := <-controls
	require.Equal(t, f.conn.SessionID(), got.Header.Session)
	require.Equal(t, r.ParentID(), got.Header.MsgID)

	// A request the kernel never answers ends with its context.
	f.kernel.SetHandler(jupytertest.Stall)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = f.conn.Request(short, jupyter.ChannelShell, "comm_info_request", struct{}{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Nil(t, f.conn.Err(), "a timed-out request leaves the connection up")

	// Many requests in flight at once are each answered.
	f.kernel.SetHandler(nil)
	errs := make(chan error, 20)
	for i := range 20 {
		go func() {
			_, err := f.conn.Request(ctx, jupyter.ChannelShell, fmt.Sprintf("r%d_request", i), struct{}{})
			errs <- err
		}()
	}
	for range 20 {
		require.NoError(t, <-errs)
	}
}

// TestDefaultHandler runs the tiny kernel of the fake through Run.
func TestDefaultHandler(t *testing.T) {
	t.Parallel()
	f := newFake(t, nil, nil, nil)
	for i := 1; i <= 2; i++ {
		var got []*jupyter.Message
		r, err := f.conn.Run(testCtx(t), "print('hi')", func(m *jupyter.Message) { got = append(got, m) })
		require.NoError(t, err)
		require.Equal(t, jupyter.ExecuteReply{Status: "ok", ExecutionCount: i, UserExpressions: r.UserExpressions}, *r)
		require.Equal(t, []string{"stream:stdout:print('hi')"}, summary(t, got))
	}
}

// TestExecuteReplyForeign checks that the launcher's kernelbox_foreign count on an
// execute_reply is decoded (and absent means 0), and that Reply decodes once: the
// same reply is returned however often it is asked.
func TestExecuteReplyForeign(t *testing.T) {
	t.Parallel()
	for _, want := range []int{0, 7} {
		h := func(k *jupytertest.Kernel, req *jupyter.Message) {
			if req.Type() != "execute_request" {
				jupytertest.DefaultHandler(k, req)
				return
			}
			k.Status(req, "busy")
			k.Reply(req, map[string]any{"status": "ok", "execution_count": 1, "kernelbox_foreign": want})
			k.Status(req, "idle")
		}
		f := newFake(t, nil, h, nil)
		ex := execute(t, f.conn, "x")
		_, err := drain(t, ex)
		require.NoError(t, err)
		r, err := ex.Reply()
		require.NoError(t, err)
		require.Equal(t, want, r.Foreign)
		again, err := ex.Reply()
		require.NoError(t, err)
		require.Same(t, r, again)
	}
}
