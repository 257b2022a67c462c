package jupyter_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/jupyter/jupytertest"
	"github.com/stretchr/testify/require"
)

// TestReconnectReplay drops the WebSocket in the middle of an execution: the client
// re-dials with the same session_id, the server replays what the kernel sent in the
// meantime, and the execution completes with every output.
func TestReconnectReplay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// gate holds the client off until the kernel has sent everything, so the
		// replay path is taken for sure; without it the client may reconnect before,
		// during or after the kernel's messages, and each must work.
		gate  bool
		proto jupyter.Protocol
	}{
		{"buffered/legacy", true, jupyter.ProtocolLegacy},
		{"buffered/v1", true, jupyter.ProtocolV1},
		{"racing/legacy", false, jupyter.ProtocolLegacy},
		{"racing/v1", false, jupyter.ProtocolV1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, reqs := capture()
			f := newFake(t, nil, h, &jupyter.ConnOptions{Protocol: tc.proto})
			ex := execute(t, f.conn, "long()")
			req := recv(t, reqs)
			f.kernel.Status(req, "busy")
			f.kernel.Stream(req, "stdout", "a")
			m, err := ex.Next(testCtx(t))
			require.NoError(t, err)
			require.Equal(t, []string{"stream:stdout:a"}, summary(t, []*jupyter.Message{m}))

			if tc.gate {
				f.kernel.Refuse(http.StatusServiceUnavailable)
			}
			require.Equal(t, 1, f.kernel.DropConnection())
			f.kernel.Stream(req, "stdout", "b")
			f.kernel.Result(req, 1, map[string]any{"text/plain": "c"})
			f.kernel.Reply(req, okReply(1))
			f.kernel.Status(req, "idle")
			if tc.gate {
				require.Equal(t, 0, f.kernel.Replayed())
				f.kernel.Refuse(0)
			}

			out, err := drain(t, ex)
			require.NoError(t, err)
			require.Equal(t, []string{"stream:stdout:b", `execute_result:"c"`}, summary(t, out))
			if tc.gate {
				require.Equal(t, 4, f.kernel.Replayed())
			}
			sessions := f.kernel.Sessions()
			require.Len(t, sessions, 2)
			require.Equal(t, f.conn.SessionID(), sessions[0])
			require.Equal(t, f.conn.SessionID(), sessions[1])
			require.Equal(t, tc.proto, f.conn.Protocol())

			f.kernel.SetHandler(nil)
			r, err := f.conn.Run(testCtx(t), "again", nil)
			require.NoError(t, err)
			require.Equal(t, "ok", r.Status)
			require.NoError(t, f.conn.Err())
		})
	}
}

// TestReconnectFails drops the WebSocket while the server will not take it back: the
// call in flight fails with ErrConnectionLost within the reconnect timeout, never
// hangs, and later calls fail at once.
func TestReconnectFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  jupyter.ConnOptions
		fault func(f *fake)
	}{
		{"kernel-deleted", jupyter.ConnOptions{ReconnectTimeout: time.Minute}, func(f *fake) {
			require.True(t, f.srv.DeleteKernel(f.kernel.ID))
		}},
		{"refused-404", jupyter.ConnOptions{ReconnectTimeout: time.Minute}, func(f *fake) {
			f.kernel.Refuse(http.StatusNotFound)
			f.kernel.DropConnection()
		}},
		{"refused-503-until-timeout", jupyter.ConnOptions{ReconnectTimeout: 300 * time.Millisecond}, func(f *fake) {
			f.kernel.Refuse(http.StatusServiceUnavailable)
			f.kernel.DropConnection()
		}},
		{"reconnect-disabled", jupyter.ConnOptions{ReconnectTimeout: -1}, func(f *fake) {
			f.kernel.DropConnection()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, reqs := capture()
			f := newFake(t, nil, h, &tc.opts)
			ex := execute(t, f.conn, "long()")
			req := recv(t, reqs)
			f.kernel.Status(req, "busy")

			start := time.Now()
			tc.fault(f)
			_, err := drain(t, ex)
			require.ErrorIs(t, err, jupyter.ErrConnectionLost)
			require.Less(t, time.Since(start), 5*time.Second)
			<-f.conn.Done()
			require.ErrorIs(t, f.conn.Err(), jupyter.ErrConnectionLost)

			_, err = f.conn.Execute(testCtx(t), jupyter.ExecuteRequest{Code: "1"})
			require.ErrorIs(t, err, jupyter.ErrConnectionLost)
			_, err = f.conn.KernelInfo(testCtx(t))
			require.ErrorIs(t, err, jupyter.ErrConnectionLost)
			require.NoError(t, f.conn.Close())
		})
	}
}

// TestReconnectLostReply drops the WebSocket just as the kernel finishes, so its
// reply is lost rather than buffered. After reconnecting, the client asks the REST API:
// an idle kernel means the reply will never come, and the call fails with
// ErrConnectionLost; a busy kernel is left to finish.
func TestReconnectLostReply(t *testing.T) {
	t.Parallel()
	t.Run("idle", func(t *testing.T) {
		t.Parallel()
		h, reqs := capture()
		f := newFake(t, nil, h, nil)
		ex := execute(t, f.conn, "x")
		req := recv(t, reqs)
		f.kernel.Status(req, "busy")

		start := time.Now()
		f.kernel.DropConnection()
		f.kernel.SetExecutionState("idle") // the reply and idle went to the dead socket
		_, err := drain(t, ex)
		require.ErrorIs(t, err, jupyter.ErrConnectionLost)
		require.GreaterOrEqual(t, time.Since(start), time.Second, "failed by the watchdog, not the drop")

		// The connection itself is fine.
		require.NoError(t, f.conn.Err())
		f.kernel.SetHandler(nil)
		_, err = f.conn.Run(testCtx(t), "next", nil)
		require.NoError(t, err)
	})
	t.Run("busy", func(t *testing.T) {
		t.Parallel()
		h, reqs := capture()
		f := newFake(t, nil, h, nil)
		ex := execute(t, f.conn, "x")
		req := recv(t, reqs)
		f.kernel.Status(req, "busy")

		f.kernel.DropConnection()
		require.Eventually(t, func() bool { return len(f.kernel.Sessions()) == 2 }, testTimeout, tick)
		time.Sleep(2500 * time.Millisecond) // past the watchdog's look at the kernel
		f.kernel.Stream(req, "stdout", "late")
		f.kernel.Reply(req, okReply(1))
		f.kernel.Status(req, "idle")
		out, err := drain(t, ex)
		require.NoError(t, err)
		require.Equal(t, []string{"stream:stdout:late"}, summary(t, out))
	})
}

// TestReconnectWatchdogSparesNewCalls checks that the look at the kernel after a
// reconnect only concerns calls that were in flight during the drop: a call started
// after the reconnect, which the kernel has not yet reported busy for, is not failed.
func TestReconnectWatchdogSparesNewCalls(t *testing.T) {
	t.Parallel()
	h, reqs := capture()
	f := newFake(t, nil, h, nil)
	f.kernel.DropConnection()
	waitReconnected(t, f.conn)

	ex := execute(t, f.conn, "x")
	req := recv(t, reqs)
	time.Sleep(2500 * time.Millisecond) // the REST API still says idle when the watchdog looks
	f.kernel.Status(req, "busy")
	f.kernel.Reply(req, okReply(1))
	f.kernel.Status(req, "idle")
	_, err := drain(t, ex)
	require.NoError(t, err)
}

// TestCloseWhileReconnecting checks that Close during a reconnect returns promptly and
// fails the calls in flight with ErrClosed.
func TestCloseWhileReconnecting(t *testing.T) {
	t.Parallel()
	f := newFake(t, nil, jupytertest.Stall, &jupyter.ConnOptions{ReconnectTimeout: time.Minute})
	ex := execute(t, f.conn, "x")
	f.kernel.Refuse(http.StatusServiceUnavailable)
	f.kernel.DropConnection()
	time.Sleep(100 * time.Millisecond) // the client is now re-dialling

	start := time.Now()
	require.NoError(t, f.conn.Close())
	require.Less(t, time.Since(start), 2*time.Second)
	_, err := drain(t, ex)
	require.ErrorIs(t, err, jupyter.ErrClosed)
}

// TestCloseRacingReconnect closes the Conn at the moment a dropped connection is being
// re-established; whichever wins, Close must return promptly.
func TestCloseRacingReconnect(t *testing.T) {
	t.Parallel()
	srv := jupytertest.New(t, nil)
	c := newClient(t, srv.Endpoint())
	k := srv.AddKernel("")
	for i := range 30 {
		conn, err := c.Connect(testCtx(t), k.ID, &jupyter.ConnOptions{PingInterval: time.Hour})
		require.NoError(t, err)
		k.DropConnection()
		time.Sleep(time.Duration(i%10) * 100 * time.Microsecond)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = conn.Close()
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("Close hung (round %d)", i)
		}
	}
}

// TestCloseRacingCalls closes Conns while calls are being sent: every call fails with
// ErrClosed, whether Close caught it before, during or after its send.
func TestCloseRacingCalls(t *testing.T) {
	t.Parallel()
	srv := jupytertest.New(t, nil)
	c := newClient(t, srv.Endpoint())
	k := srv.AddKernel("")
	for range 20 {
		conn, err := c.Connect(testCtx(t), k.ID, nil)
		require.NoError(t, err)
		errs := make(chan error, 4)
		for g := range 4 {
			go func() {
				for {
					var err error
					if g%2 == 0 {
						_, err = conn.KernelInfo(context.Background())
					} else {
						var ex *jupyter.Execution
						ex, err = conn.Execute(context.Background(), jupyter.ExecuteRequest{Code: "x"})
						for err == nil {
							_, err = ex.Next(context.Background())
						}
						if err == io.EOF {
							err = nil
						}
						if ex != nil {
							ex.Close()
						}
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		time.Sleep(5 * time.Millisecond)
		require.NoError(t, conn.Close())
		for range 4 {
			require.ErrorIs(t, <-errs, jupyter.ErrClosed)
		}
	}
}
