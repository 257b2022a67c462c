package jupyter_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/jupyter/jupytertest"
	"github.com/stretchr/testify/require"
)

// TestKernelDeath checks that a status "restarting" or "dead" with an empty parent
// fails every call in flight with a *KernelDiedError, stops the Conn, and makes later
// calls fail at once.
func TestKernelDeath(t *testing.T) {
	t.Parallel()
	for _, state := range []string{"restarting", "dead"} {
		for _, proto := range []jupyter.Protocol{jupyter.ProtocolLegacy, jupyter.ProtocolV1} {
			t.Run(state+"/"+proto.String(), func(t *testing.T) {
				t.Parallel()
				h, reqs := capture()
				f := newFake(t, nil, h, &jupyter.ConnOptions{Protocol: proto})
				ex1 := execute(t, f.conn, "import os; os._exit(1)")
				req := recv(t, reqs)
				ex2 := execute(t, f.conn, "queued")
				recv(t, reqs)
				f.kernel.SetHandler(jupytertest.Stall)
				reqErr := make(chan error, 1)
				go func() {
					_, err := f.conn.KernelInfo(testCtx(t))
					reqErr <- err
				}()

				f.kernel.Status(req, "busy")
				f.kernel.Stream(req, "stdout", "before")
				time.Sleep(20 * time.Millisecond) // let the kernel_info_request be sent
				f.kernel.KernelStatus(state)

				out, err := drain(t, ex1)
				require.Equal(t, []string{"stream:stdout:before"}, summary(t, out), "output before the death is delivered")
				requireDied(t, err, state)
				_, err = drain(t, ex2)
				requireDied(t, err, state)
				requireDied(t, <-reqErr, state)
				_, err = ex1.Reply()
				requireDied(t, err, state)

				select {
				case <-f.conn.Done():
				case <-time.After(5 * time.Second):
					t.Fatal("Conn not done after the kernel died")
				}
				requireDied(t, f.conn.Err(), state)
				_, err = f.conn.Execute(testCtx(t), jupyter.ExecuteRequest{Code: "1"})
				requireDied(t, err, state)
				_, err = f.conn.KernelInfo(testCtx(t))
				requireDied(t, err, state)
				require.Eventually(t, func() bool { return f.kernel.Connections() == 0 }, testTimeout, tick,
					"the client closes its WebSocket")
				require.NoError(t, f.conn.Close())

				// A new connection to the (restarted) kernel works.
				f.kernel.SetHandler(nil)
				conn := connect(t, f.client, f.kernel.ID, &jupyter.ConnOptions{Protocol: proto})
				r, err := conn.Run(testCtx(t), "1", nil)
				require.NoError(t, err)
				require.Equal(t, "ok", r.Status)
			})
		}
	}
}

func requireDied(t *testing.T, err error, state string) {
	t.Helper()
	require.ErrorIs(t, err, jupyter.ErrKernelDied)
	var kd *jupyter.KernelDiedError
	require.True(t, errors.As(err, &kd), "%v is not a *KernelDiedError", err)
	require.Equal(t, state, kd.State)
}

// TestStatusWithParentIsNotDeath checks that only a parentless status means death: a
// "restarting" or "dead" status answering some request, or a parentless "busy"/"idle"
// (which Jupyter sends while a kernel starts), leave the connection alone.
func TestStatusWithParentIsNotDeath(t *testing.T) {
	t.Parallel()
	h, reqs := capture()
	f := newFake(t, nil, h, nil)
	ex := execute(t, f.conn, "x")
	req := recv(t, reqs)
	f.kernel.KernelStatus("starting")
	f.kernel.KernelStatus("busy")
	f.kernel.KernelStatus("idle")
	f.kernel.SendForeign(jupyter.ChannelIOPub, "status", jupyter.StatusContent{ExecutionState: "dead"})
	f.kernel.Publish(req, "status", jupyter.StatusContent{ExecutionState: "restarting"})
	f.kernel.Reply(req, okReply(1))
	f.kernel.Status(req, "idle")
	_, err := drain(t, ex)
	require.NoError(t, err)
	require.NoError(t, f.conn.Err())
}
