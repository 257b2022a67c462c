package jupyterproc_test

import (
	"context"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/jupyterproc"
	"github.com/kernelbox/kernelbox/internal/serverflags"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/stretchr/testify/require"
)

// The server runs through kernelbox's launcher: kernels start with the kernelbox
// kernelspec (without debugpy), run code, and the server's activity monitor (which
// would decode every iopub message a second time) is off, so the REST model's
// fields keep their start values.
func TestServer(t *testing.T) {
	py := testenv.Jupyter(t)
	ctx := context.Background()
	s, err := jupyterproc.Start(ctx, jupyterproc.Options{Python: py, RootDir: t.TempDir()})
	require.NoError(t, err)
	defer s.Stop(ctx)
	c, err := jupyter.NewClient(s.Endpoint(), nil)
	require.NoError(t, err)
	k, err := c.StartKernel(ctx, jupyter.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, serverflags.KernelName, k.Name)
	conn, err := c.Connect(ctx, k.ID, nil)
	require.NoError(t, err)
	defer conn.Close()
	r, err := conn.Run(ctx, "import os, sys; 1 + 1", nil)
	require.NoError(t, err)
	require.Equal(t, "ok", r.Status)
	// The launcher kept debugpy out of the kernel's start (a third of its imports'
	// CPU), and code can still import it.
	r, err = conn.Run(ctx, "assert 'debugpy' not in sys.modules, 'debugpy was imported at start'\nimport debugpy", nil)
	require.NoError(t, err)
	require.Equal(t, "ok", r.Status, "%s: %s", r.Ename, r.Evalue)
	time.Sleep(200 * time.Millisecond)
	after, err := c.Kernel(ctx, k.ID)
	require.NoError(t, err)
	require.Equal(t, "starting", after.ExecutionState)
	require.Equal(t, k.LastActivity, after.LastActivity, "no activity monitor")
}

// A server that cannot start reports its output.
func TestServerFailsClearly(t *testing.T) {
	_, err := jupyterproc.Start(context.Background(), jupyterproc.Options{Python: "/bin/false", RootDir: t.TempDir(), ReadyTimeout: 5 * time.Second})
	require.ErrorContains(t, err, "exited before it was ready")
}
