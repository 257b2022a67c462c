package remote_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/backends/remote"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/jupyterproc"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/jupyter"
)

// The remote backend moves a session's files through its kernel with Python code, so
// it refuses an R kernel with a clear error: at New when its own kernel
// (Options.KernelName) is R's, whose kernelspec says so.
func TestRKernelRefusedAtNew(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	testenv.RKernel(t)
	s, _ := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := remote.New(ctx, remote.Options{Gateways: []remote.Gateway{gw(s)}, KernelName: "ir"})
	if err == nil {
		_ = b.Close(context.Background())
	}
	require.ErrorIs(t, err, executor.ErrKernelUnavailable)
	require.Contains(t, err.Error(), `kernelspec "ir" is R`)
	require.Contains(t, err.Error(), "Python kernels only")
	t.Log(err)
}

// A session's own R kernel (executor Options.Kernel) is refused before any call runs
// in it: the gateway offers "ir" (Debian's IRkernel), so the kernel starts, and the
// executor refuses it when its kernel_info says R.
func TestRKernelRefused(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	testenv.RKernel(t)
	s, _ := startGateway(t)
	b := newBackend(t, []remote.Gateway{gw(s)}, nil)
	e := newEnv(t, b, func(o *executor.Options) { o.Kernel = "ir" })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := e.Execute(ctx, api.Request{SessionID: "r", Code: "x <- 41"})
	require.ErrorIs(t, err, executor.ErrKernelUnavailable, "result: %+v", r)
	require.ErrorIs(t, err, api.ErrBackend)
	require.Contains(t, err.Error(), `kernel "ir" speaks R`)
	require.Contains(t, err.Error(), "Python kernels only")
	t.Log(err)
	// The refused kernel was shut down, not left on the gateway.
	c := gatewayClient(t, s)
	require.Eventually(t, func() bool {
		ks, err := c.Kernels(context.Background())
		return err == nil && len(ks) == 0
	}, time.Minute, 100*time.Millisecond)
}

// gatewayClient is a REST client of the test gateway s.
func gatewayClient(t testing.TB, s *jupyterproc.Server) *jupyter.Client {
	t.Helper()
	c, err := jupyter.NewClient(s.Endpoint(), nil)
	require.NoError(t, err)
	t.Cleanup(c.CloseIdle)
	return c
}
