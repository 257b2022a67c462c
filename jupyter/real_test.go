package jupyter_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/jupyterproc"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/stretchr/testify/require"
)

// startServer starts a real Jupyter Server for the test.
func startServer(t testing.TB, tcp bool) *jupyterproc.Server {
	t.Helper()
	return startServerAt(t, t.TempDir(), tcp)
}

// startServerAt starts a real Jupyter Server whose root directory is root.
func startServerAt(t testing.TB, root string, tcp bool) *jupyterproc.Server {
	t.Helper()
	py := testenv.Jupyter(t)
	o := jupyterproc.Options{Python: py, RootDir: root}
	if tcp {
		o.TCPAddr = "127.0.0.1:0"
	}
	s, err := jupyterproc.Start(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

// startKernel starts a kernel and connects to it.
func startKernel(t testing.TB, s *jupyterproc.Server, proto jupyter.Protocol) (*jupyter.Client, *jupyter.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := jupyter.NewClient(s.Endpoint(), nil)
	require.NoError(t, err)
	k, err := c.StartKernel(ctx, jupyter.StartOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Shutdown(context.Background(), k.ID) })
	conn, err := c.Connect(ctx, k.ID, &jupyter.ConnOptions{Protocol: proto})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = conn.KernelInfo(ctx)
	require.NoError(t, err)
	return c, conn
}

// connectReady connects to a kernel the server may still be restarting. A WebSocket
// opened during the restart can miss the new kernel's iopub messages (Jupyter Server
// 1.23 does not "nudge" the iopub subscription of a kernel it still believes busy), so
// a connection whose probe execution does not complete is replaced, as the executor
// does.
func connectReady(t testing.TB, c *jupyter.Client, id string, proto jupyter.Protocol) *jupyter.Conn {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := c.Connect(context.Background(), id, &jupyter.ConnOptions{Protocol: proto})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = probe(ctx, conn)
		cancel()
		if err == nil {
			t.Cleanup(func() { _ = conn.Close() })
			return conn
		}
		_ = conn.Close()
		require.True(t, time.Now().Before(deadline), "kernel not ready: %v", err)
		t.Logf("connection not ready (%v); connecting again", err)
	}
}

// probe runs a silent empty cell, which completes only once shell and iopub both work.
func probe(ctx context.Context, conn *jupyter.Conn) error {
	ex, err := conn.Execute(ctx, jupyter.ExecuteRequest{Silent: true})
	if err != nil {
		return err
	}
	defer ex.Close()
	for {
		if _, err := ex.Next(ctx); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func collect(t testing.TB, conn *jupyter.Conn, code string) (string, *jupyter.ExecuteReply, error) {
	t.Helper()
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := conn.Run(ctx, code, func(m *jupyter.Message) {
		switch m.Type() {
		case "stream":
			var s jupyter.StreamContent
			_ = m.DecodeContent(&s)
			out.WriteString(s.Text)
		case "execute_result":
			var d jupyter.DisplayContent
			_ = m.DecodeContent(&d)
			out.WriteString(string(d.Data["text/plain"]))
		case "error":
			var e jupyter.ErrorContent
			_ = m.DecodeContent(&e)
			out.WriteString(e.Ename)
		}
	})
	return out.String(), r, err
}

func TestRealServer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tcp   bool
		proto jupyter.Protocol
	}{
		{"unix-v1", false, jupyter.ProtocolAuto},
		{"unix-legacy", false, jupyter.ProtocolLegacy},
		{"tcp-v1", true, jupyter.ProtocolAuto},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, tc.tcp)
			c, conn := startKernel(t, s, tc.proto)
			if tc.proto == jupyter.ProtocolAuto {
				require.Equal(t, jupyter.ProtocolV1, conn.Protocol())
			}
			out, r, err := collect(t, conn, "x = 41\nprint('hi')")
			require.NoError(t, err)
			require.Equal(t, "ok", r.Status)
			require.Equal(t, "hi\n", out)
			out, _, err = collect(t, conn, "x + 1")
			require.NoError(t, err)
			require.Equal(t, `"42"`, out)
			out, r, err = collect(t, conn, "1/0")
			require.NoError(t, err)
			require.Equal(t, "error", r.Status)
			require.Equal(t, "ZeroDivisionError", out)

			// input() fails at once instead of hanging.
			_, r, err = collect(t, conn, "input()")
			require.NoError(t, err)
			require.Equal(t, "error", r.Status)

			// Kernel death fails the call with ErrKernelDied; the server restarts it.
			_, _, err = collect(t, conn, "import os; os._exit(1)")
			require.ErrorIs(t, err, jupyter.ErrKernelDied)
			<-conn.Done()
			_, _, err = collect(t, conn, "1")
			require.ErrorIs(t, err, jupyter.ErrKernelDied)
			conn = connectReady(t, c, conn.KernelID(), tc.proto)
			out2, _, err := collect(t, conn, "'x' in dir()")
			require.NoError(t, err)
			require.Equal(t, `"False"`, out2)

			ks, err := c.Kernels(context.Background())
			require.NoError(t, err)
			require.Len(t, ks, 1)
		})
	}
}

func TestRealInterrupt(t *testing.T) {
	s := startServer(t, false)
	c, conn := startKernel(t, s, jupyter.ProtocolAuto)
	ctx := context.Background()
	ex, err := conn.Execute(ctx, jupyter.ExecuteRequest{Code: "import time\nprint('start', flush=True)\ntime.sleep(60)"})
	require.NoError(t, err)
	defer ex.Close()
	m, err := ex.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "stream", m.Type())
	require.NoError(t, c.Interrupt(ctx, conn.KernelID()))
	var sawError bool
	for {
		m, err := ex.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if m.Type() == "error" {
			sawError = true
		}
	}
	require.True(t, sawError)
	r, err := ex.Reply()
	require.NoError(t, err)
	require.Equal(t, "error", r.Status)
	require.Equal(t, "KeyboardInterrupt", r.Ename)
}

func TestRealOversized(t *testing.T) {
	s := startServer(t, false)
	for _, proto := range []jupyter.Protocol{jupyter.ProtocolAuto, jupyter.ProtocolLegacy} {
		t.Run(proto.String(), func(t *testing.T) {
			c, err := jupyter.NewClient(s.Endpoint(), nil)
			require.NoError(t, err)
			ctx := context.Background()
			k, err := c.StartKernel(ctx, jupyter.StartOptions{})
			require.NoError(t, err)
			defer c.Shutdown(ctx, k.ID)
			conn, err := c.Connect(ctx, k.ID, &jupyter.ConnOptions{Protocol: proto, MaxMessageBytes: 1 << 20})
			require.NoError(t, err)
			defer conn.Close()
			var got int
			var truncated bool
			var dropped int64
			_, err = conn.Run(ctx, "print('x' * 5_000_000)", func(m *jupyter.Message) {
				var st jupyter.StreamContent
				require.NoError(t, m.DecodeContent(&st))
				got += len(st.Text)
				truncated = truncated || m.Truncated
				dropped += m.DroppedBytes
			})
			require.NoError(t, err)
			require.True(t, truncated)
			require.Greater(t, got, 900_000)
			require.LessOrEqual(t, got, 1<<20)
			require.InDelta(t, 5_000_001, int64(got)+dropped, 2000)
		})
	}
}
