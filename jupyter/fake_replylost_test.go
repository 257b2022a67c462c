package jupyter_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/jupyter/jupytertest"
	"github.com/stretchr/testify/require"
)

// An execution whose kernel goes idle and never replies (ipykernel drops the reply
// of a request a KeyboardInterrupt hit outside the cell's code) ends with
// ErrReplyLost a bounded time after the idle status, not at its caller's timeout;
// InCode is true only between its execute_input and its end.
func TestExecuteReplyLost(t *testing.T) {
	t.Parallel()
	inCode := make(chan *jupyter.Message, 1)
	release := make(chan struct{})
	h := func(k *jupytertest.Kernel, req *jupyter.Message) {
		if req.Type() != "execute_request" {
			jupytertest.DefaultHandler(k, req)
			return
		}
		k.Status(req, "busy")
		k.ExecuteInput(req, "x", 1)
		inCode <- req
		<-release
		k.Status(req, "idle") // and no execute_reply
	}
	f := newFake(t, nil, h, nil)
	ex := execute(t, f.conn, "x")
	<-inCode
	require.Eventually(t, ex.InCode, 5*time.Second, 5*time.Millisecond, "in code after its execute_input")
	close(release)
	t0 := time.Now()
	_, err := drain(t, ex)
	require.ErrorIs(t, err, jupyter.ErrReplyLost)
	require.Less(t, time.Since(t0), 10*time.Second)
	require.False(t, ex.InCode())
	require.Contains(t, err.Error(), "went idle")

	// The connection goes on: the next execution completes as usual.
	f.kernel.SetHandler(jupytertest.DefaultHandler)
	_, err = drain(t, execute(t, f.conn, "y"))
	require.NoError(t, err)
}

// A reply that follows its idle status by less than the bound completes the
// execution as usual (the channels are not ordered), and InCode ends with the idle.
func TestExecuteIdleBeforeLateReply(t *testing.T) {
	t.Parallel()
	h := func(k *jupytertest.Kernel, req *jupyter.Message) {
		if req.Type() != "execute_request" {
			jupytertest.DefaultHandler(k, req)
			return
		}
		k.Status(req, "busy")
		k.ExecuteInput(req, "x", 1)
		k.Status(req, "idle")
		time.Sleep(300 * time.Millisecond)
		k.Reply(req, okReply(1))
	}
	f := newFake(t, nil, h, nil)
	ex := execute(t, f.conn, "x")
	_, err := drain(t, ex)
	require.NoError(t, err)
	require.False(t, errors.Is(err, jupyter.ErrReplyLost))
	require.False(t, ex.InCode())
}
