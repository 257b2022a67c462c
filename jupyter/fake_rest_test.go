package jupyter_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/jupyter/jupytertest"
	"github.com/stretchr/testify/require"
)

func TestRESTKernelLifecycle(t *testing.T) {
	t.Parallel()
	// The fake kernel answers an interrupt the way ipykernel does: the running cell
	// ends with KeyboardInterrupt.
	var running atomic.Pointer[jupyter.Message]
	srv := jupytertest.New(t, &jupytertest.Options{
		Handler: func(k *jupytertest.Kernel, req *jupyter.Message) {
			if req.Type() == "execute_request" {
				k.Status(req, "busy")
				running.Store(req)
				return
			}
			jupytertest.DefaultHandler(k, req)
		},
		OnInterrupt: func(k *jupytertest.Kernel) {
			if req := running.Swap(nil); req != nil {
				k.Error(req, "KeyboardInterrupt", "", nil)
				k.Reply(req, jupyter.ExecuteReply{Status: "error", ExecutionCount: 1, Ename: "KeyboardInterrupt"})
				k.Status(req, "idle")
			}
		},
	})
	c := newClient(t, srv.Endpoint())
	ctx := testCtx(t)

	v, err := c.Version(ctx)
	require.NoError(t, err)
	require.Equal(t, "1.23.2", v)

	specs, err := c.KernelSpecs(ctx)
	require.NoError(t, err)
	require.Equal(t, "python3", specs.Default)
	require.Equal(t, "python", specs.KernelSpecs["python3"].Spec.Language)
	require.Equal(t, "signal", specs.KernelSpecs["python3"].Spec.InterruptMode)

	ks, err := c.Kernels(ctx)
	require.NoError(t, err)
	require.Empty(t, ks)

	k, err := c.StartKernel(ctx, jupyter.StartOptions{Name: "python3", Path: "sessions/s1", Env: map[string]string{"KERNEL_USERNAME": "agent"}})
	require.NoError(t, err)
	require.Equal(t, "python3", k.Name)
	kernel := srv.Kernel(k.ID)
	require.NotNil(t, kernel)
	require.Equal(t, "python3", kernel.Name)
	require.Equal(t, "sessions/s1", kernel.Path)
	require.Equal(t, map[string]string{"KERNEL_USERNAME": "agent"}, kernel.Env)

	k2, err := c.StartKernel(ctx, jupyter.StartOptions{})
	require.NoError(t, err)
	require.Empty(t, srv.Kernel(k2.ID).Path, "no path is sent when none is given")
	require.Nil(t, srv.Kernel(k2.ID).Env)

	ks, err = c.Kernels(ctx)
	require.NoError(t, err)
	require.Len(t, ks, 2)

	conn := connect(t, c, k.ID, nil)
	got, err := c.Kernel(ctx, k.ID)
	require.NoError(t, err)
	require.Equal(t, k.ID, got.ID)
	require.Eventually(t, func() bool { // the fake counts the socket once its handshake is over
		got, err := c.Kernel(ctx, k.ID)
		return err == nil && got.Connections == 1
	}, testTimeout, tick)

	// Interrupt reaches the kernel, which ends the running cell.
	ex := execute(t, conn, "while True: pass")
	require.Eventually(t, func() bool { return running.Load() != nil }, testTimeout, tick)
	got, err = c.Kernel(ctx, k.ID)
	require.NoError(t, err)
	require.Equal(t, "busy", got.ExecutionState)
	require.NoError(t, c.Interrupt(ctx, k.ID))
	require.Equal(t, 1, kernel.Interrupts())
	out, err := drain(t, ex)
	require.NoError(t, err)
	require.Equal(t, []string{"error:KeyboardInterrupt"}, summary(t, out))
	r, err := ex.Reply()
	require.NoError(t, err)
	require.Equal(t, "KeyboardInterrupt", r.Ename)

	restarted, err := c.Restart(ctx, k.ID)
	require.NoError(t, err)
	require.Equal(t, k.ID, restarted.ID)
	require.Equal(t, 1, kernel.Restarts())

	require.NoError(t, c.Shutdown(ctx, k.ID))
	require.Nil(t, srv.Kernel(k.ID))
	require.NoError(t, c.Shutdown(ctx, k.ID), "a kernel already gone is not an error")
	<-conn.Done()
	require.ErrorIs(t, conn.Err(), jupyter.ErrConnectionLost)
}

// TestRESTErrors checks how REST failures are reported: a 404 is ErrNotFound, and
// every failure is an *HTTPError carrying the server's message.
func TestRESTErrors(t *testing.T) {
	t.Parallel()
	srv := jupytertest.New(t, &jupytertest.Options{Token: "secret"})
	good := newClient(t, srv.Endpoint())
	ctx := testCtx(t)
	k, err := good.StartKernel(ctx, jupyter.StartOptions{})
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		call func(c *jupyter.Client) error
	}{
		{"kernel", func(c *jupyter.Client) error { _, err := c.Kernel(ctx, "nope"); return err }},
		{"interrupt", func(c *jupyter.Client) error { return c.Interrupt(ctx, "nope") }},
		{"restart", func(c *jupyter.Client) error { _, err := c.Restart(ctx, "nope"); return err }},
		{"connect", func(c *jupyter.Client) error { _, err := c.Connect(ctx, "nope", nil); return err }},
	} {
		t.Run("404-"+tc.name, func(t *testing.T) {
			err := tc.call(good)
			require.ErrorIs(t, err, jupyter.ErrNotFound)
			var he *jupyter.HTTPError
			require.True(t, errors.As(err, &he))
			require.Equal(t, http.StatusNotFound, he.StatusCode)
			require.Equal(t, "Kernel does not exist: nope", he.Message)
		})
	}

	ep := srv.Endpoint()
	for _, token := range []string{"", "wrong"} {
		ep.Token = token
		bad := newClient(t, ep)
		for _, tc := range []struct {
			name string
			call func() error
		}{
			{"version", func() error { _, err := bad.Version(ctx); return err }},
			{"start", func() error { _, err := bad.StartKernel(ctx, jupyter.StartOptions{}); return err }},
			{"connect", func() error { _, err := bad.Connect(ctx, k.ID, nil); return err }},
		} {
			t.Run("403-"+tc.name+"-token="+token, func(t *testing.T) {
				err := tc.call()
				var he *jupyter.HTTPError
				require.True(t, errors.As(err, &he), "%v", err)
				require.Equal(t, http.StatusForbidden, he.StatusCode)
				require.Equal(t, "Forbidden", he.Message)
				require.NotErrorIs(t, err, jupyter.ErrNotFound)
				require.Contains(t, err.Error(), "403: Forbidden")
			})
		}
	}

	// The right token works for the WebSocket too.
	conn := connect(t, good, k.ID, nil)
	_, err = conn.KernelInfo(ctx)
	require.NoError(t, err)
}

// TestUnixSocket reaches the fake over a unix socket, REST and WebSocket.
func TestUnixSocket(t *testing.T) {
	t.Parallel()
	srv := jupytertest.New(t, &jupytertest.Options{Socket: true, Token: "t"})
	for _, proto := range []jupyter.Protocol{jupyter.ProtocolAuto, jupyter.ProtocolLegacy} {
		t.Run(proto.String(), func(t *testing.T) {
			ep := srv.SocketEndpoint()
			require.Empty(t, ep.URL)
			c := newClient(t, ep)
			ctx := testCtx(t)
			_, err := c.Version(ctx)
			require.NoError(t, err)
			k, err := c.StartKernel(ctx, jupyter.StartOptions{})
			require.NoError(t, err)
			conn := connect(t, c, k.ID, &jupyter.ConnOptions{Protocol: proto})
			var got []*jupyter.Message
			_, err = conn.Run(ctx, "over the socket", func(m *jupyter.Message) { got = append(got, m) })
			require.NoError(t, err)
			require.Equal(t, []string{"stream:stdout:over the socket"}, summary(t, got))

			// A drop and reconnect go over the socket as well.
			fk := srv.Kernel(k.ID)
			fk.DropConnection()
			waitReconnected(t, conn)
			require.Len(t, fk.Sessions(), 2)
			_, err = conn.Run(ctx, "again", nil)
			require.NoError(t, err)
		})
	}
}

// TestEndpointDial reaches the fake through Endpoint.Dial alone (the docker
// backend's relay): REST and WebSocket connections are the Dial's, counted.
func TestEndpointDial(t *testing.T) {
	t.Parallel()
	srv := jupytertest.New(t, &jupytertest.Options{Socket: true, Token: "t"})
	sock := srv.SocketEndpoint().Socket
	var dials atomic.Int32
	ep := jupyter.Endpoint{Token: "t", Dial: func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	c := newClient(t, ep)
	ctx := testCtx(t)
	_, err := c.Version(ctx)
	require.NoError(t, err)
	k, err := c.StartKernel(ctx, jupyter.StartOptions{})
	require.NoError(t, err)
	conn := connect(t, c, k.ID, nil)
	_, err = conn.Run(ctx, "through Dial", nil)
	require.NoError(t, err)
	require.GreaterOrEqual(t, dials.Load(), int32(2), "REST and the WebSocket dial through Dial")
}
