package jupyter_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/jupyter/jupytertest"
	"github.com/stretchr/testify/require"
)

// Bounds for require.Eventually.
const (
	testTimeout = 5 * time.Second
	tick        = time.Millisecond
)

// fake is one client connected to one kernel of a fake server.
type fake struct {
	srv    *jupytertest.Server
	client *jupyter.Client
	kernel *jupytertest.Kernel
	conn   *jupyter.Conn
}

// newFake starts a fake server, starts a kernel on it over REST, gives the kernel
// handler h (nil: the default tiny kernel) and connects to it with o.
func newFake(t testing.TB, so *jupytertest.Options, h jupytertest.Handler, o *jupyter.ConnOptions) *fake {
	t.Helper()
	f := &fake{srv: jupytertest.New(t, so)}
	f.client = newClient(t, f.srv.Endpoint())
	k, err := f.client.StartKernel(testCtx(t), jupyter.StartOptions{})
	require.NoError(t, err)
	f.kernel = f.srv.Kernel(k.ID)
	require.NotNil(t, f.kernel)
	f.kernel.SetHandler(h)
	f.conn = connect(t, f.client, k.ID, o)
	return f
}

func newClient(t testing.TB, ep jupyter.Endpoint) *jupyter.Client {
	t.Helper()
	c, err := jupyter.NewClient(ep, nil)
	require.NoError(t, err)
	t.Cleanup(c.CloseIdle)
	return c
}

func connect(t testing.TB, c *jupyter.Client, id string, o *jupyter.ConnOptions) *jupyter.Conn {
	t.Helper()
	conn, err := c.Connect(testCtx(t), id, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// testCtx returns a context that bounds one step of a test, so a bug shows up as a
// failure instead of a hung test binary.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// capture returns a handler that hands execute_requests to the test over the
// returned channel and answers everything else like the default kernel.
func capture() (jupytertest.Handler, <-chan *jupyter.Message) {
	ch := make(chan *jupyter.Message, 16)
	return func(k *jupytertest.Kernel, req *jupyter.Message) {
		if req.Type() == "execute_request" {
			ch <- req
			return
		}
		jupytertest.DefaultHandler(k, req)
	}, ch
}

// recv waits for the next captured request.
func recv(t testing.TB, ch <-chan *jupyter.Message) *jupyter.Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no request reached the fake kernel")
		return nil
	}
}

// waitReconnected waits until a dropped conn is usable again. The fake accepting the
// new WebSocket is not enough: a request the client sends before it has switched to
// the new socket goes to the dead one and is lost.
func waitReconnected(t testing.TB, conn *jupyter.Conn) {
	t.Helper()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := conn.KernelInfo(ctx)
		return err == nil
	}, testTimeout, tick)
}

// execute starts an execution of code and registers its Close.
func execute(t testing.TB, conn *jupyter.Conn, code string) *jupyter.Execution {
	t.Helper()
	ex, err := conn.Execute(testCtx(t), jupyter.ExecuteRequest{Code: code})
	require.NoError(t, err)
	t.Cleanup(ex.Close)
	return ex
}

// drain reads an execution to its end and returns its outputs and the error that
// ended it (nil for a completed execution).
func drain(t testing.TB, ex *jupyter.Execution) ([]*jupyter.Message, error) {
	t.Helper()
	ctx := testCtx(t)
	var out []*jupyter.Message
	for {
		m, err := ex.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			require.NotErrorIs(t, err, context.DeadlineExceeded, "execution hung")
			return out, err
		}
		out = append(out, m)
	}
}

// summary renders outputs as "type:detail" strings for compact assertions.
func summary(t testing.TB, msgs []*jupyter.Message) []string {
	t.Helper()
	var s []string
	for _, m := range msgs {
		switch m.Type() {
		case "stream":
			var c jupyter.StreamContent
			require.NoError(t, m.DecodeContent(&c))
			s = append(s, "stream:"+c.Name+":"+c.Text)
		case "execute_result", "display_data":
			var c jupyter.DisplayContent
			require.NoError(t, m.DecodeContent(&c))
			s = append(s, m.Type()+":"+string(c.Data["text/plain"]))
		case "error":
			var c jupyter.ErrorContent
			require.NoError(t, m.DecodeContent(&c))
			s = append(s, "error:"+c.Ename)
		default:
			s = append(s, m.Type())
		}
	}
	return s
}

// okReply is an ok execute_reply content.
func okReply(count int) jupyter.ExecuteReply {
	return jupyter.ExecuteReply{Status: "ok", ExecutionCount: count}
}
