package executor_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/jupyter/jupytertest"
)

// A server that stops answering between two calls (SIGSTOP, a deadlock; issue 33
// item 7b: a 3 s call was held 21 s on the fake, 15.6-16 s on a real frozen server):
// the next call fails within the check's bounds (kernel_info, then the server's REST
// API, a third of ConnectTimeout each), says its code was not sent, and is not sent;
// once the server answers again, the call after runs on a fresh kernel, told its
// state is gone.
func TestFakeServerSilentBeforeCall(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, nil, func(o *executor.Options) { o.ConnectTimeout = 3 * time.Second })
	r := e.run(t, "s", "set x 1")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)

	k := e.fakeKernel(t, b, "s")
	var mu sync.Mutex
	var seen []string
	k.SetHandler(func(_ *jupytertest.Kernel, m *jupyter.Message) {
		mu.Lock()
		seen = append(seen, m.Header.MsgType)
		mu.Unlock()
	})
	srv := b.placements()[0].srv
	srv.Silence(true)
	time.Sleep(300 * time.Millisecond) // past the quiet period: the check is made

	start := time.Now()
	_, err := e.Execute(context.Background(), api.Request{SessionID: "s", Code: "print never", Timeout: 3 * time.Second})
	took := time.Since(start)
	t.Logf("a 3 s call on a silent server: %s: %v", took.Round(time.Millisecond), err)
	require.Error(t, err)
	assert.ErrorIs(t, err, api.ErrBackend)
	assert.Contains(t, err.Error(), "its code was not sent and did not run")
	assert.Less(t, took, 5*time.Second, "kernel_info 1 s, then the server 1 s")
	mu.Lock()
	assert.Equal(t, []string{"kernel_info_request"}, seen, "the call's execute_request was not sent")
	mu.Unlock()

	srv.Silence(false)
	r = e.run(t, "s", "print again")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	assert.Equal(t, "again\n", r.Stdout)
	assert.True(t, r.StateLost, "its kernel was given up")
	assert.Len(t, b.placements(), 2)
}

// A server that accepts a kernel's WebSocket but never answers its kernel_info
// (issue 33 item 7f: a docker reset under load sat 42 s in "connect to kernel" and
// never answered): the start fails after ConnectTimeout with a StepTimeoutError
// naming the step and its bound, a third of ConnectTimeout.
func TestFakeConnectStepTimeout(t *testing.T) {
	t.Parallel()
	e, _ := newFakeEnv(t, func(b *fakeBackend) { b.handler = jupytertest.Stall }, func(o *executor.Options) {
		o.ConnectTimeout = 1500 * time.Millisecond
	})
	start := time.Now()
	_, err := e.Execute(context.Background(), req("c", "print hi"))
	took := time.Since(start)
	t.Logf("start on a server that never answers kernel_info: %s: %v", took.Round(time.Millisecond), err)
	require.Error(t, err)
	assert.ErrorIs(t, err, api.ErrBackend)
	var st *executor.StepTimeoutError
	require.True(t, errors.As(err, &st), "%v", err)
	assert.Equal(t, "kernel_info", st.Step)
	assert.Equal(t, 500*time.Millisecond, st.Bound)
	assert.Contains(t, err.Error(), "kernel_info did not finish within 500ms")
	assert.Less(t, took, 5*time.Second, "ConnectTimeout 1.5 s; StartTimeout is 10 s")
}
