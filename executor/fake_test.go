package executor_test

// The executor's state machine on a fake backend (fake_backend_test.go) whose kernels
// are scripted (fake_script_test.go): no Python, seconds in all. Run them with
// go test ./executor -run Fake.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// State lives in the session's kernel; errors are results with the kernel's
// exception, without ANSI colors.
func TestFakeStateAndErrors(t *testing.T) {
	t.Parallel()
	e, _ := newFakeEnv(t, nil, nil)
	r := e.run(t, "s", "set x 41\nprint hello")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	assert.Equal(t, "hello\n", r.Stdout)
	assert.False(t, r.StateLost)
	assert.Equal(t, 1, r.ExecutionCount)

	r = e.run(t, "s", "get x")
	assert.Equal(t, "41", r.Result)
	assert.Equal(t, 2, r.ExecutionCount)

	r = e.run(t, "s", "print before\nraise")
	require.Equal(t, api.StatusError, r.Status)
	require.NotNil(t, r.Error)
	assert.Equal(t, "ValueError", r.Error.Ename)
	assert.Equal(t, []string{"ValueError: raised by the script"}, r.Error.Traceback, "ANSI colors stripped")
	assert.Equal(t, "before\n", r.Stdout)
	assert.Empty(t, r.Notes)

	info, err := e.Session("s")
	require.NoError(t, err)
	assert.Equal(t, 3, info.Calls)
	assert.Equal(t, 3, info.ExecutionCount)
}

// Calls on one session run one at a time in arrival order; a full queue refuses at
// once, and the calls already queued still run.
func TestFakeQueueFIFOAndFull(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, nil, func(o *executor.Options) { o.QueueSize = 2 })
	first := e.start(t, context.Background(), req("q", "sleep 300ms\n"))
	waitCell(t, e, b, "q")
	info, err := e.Session("q")
	require.NoError(t, err)
	assert.Equal(t, "busy", string(info.State), "the first call runs (its kernel has started)")
	second := e.start(t, context.Background(), req("q", "set order second"))
	second.waitStatus(t, "queued")
	third := e.start(t, context.Background(), req("q", "get order"))
	third.waitStatus(t, "queued")

	_, err = e.Execute(context.Background(), req("q", "print refused"))
	require.ErrorIs(t, err, api.ErrQueueFull)
	info, err = e.Session("q")
	require.NoError(t, err)
	assert.Equal(t, 2, info.Queued)

	var counts []int
	for _, c := range []*call{first, second, third} {
		r, err := c.wait(t)
		require.NoError(t, err)
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		counts = append(counts, r.ExecutionCount)
	}
	assert.Equal(t, []int{1, 2, 3}, counts, "arrival order")
	r, _ := third.wait(t)
	assert.Equal(t, "second", r.Result, "the third call ran after the second")
}

// A call past its timeout whose kernel honours the interrupt ends as a timeout; the
// session keeps its state.
func TestFakeTimeoutInterruptHonoured(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, nil, nil)
	e.run(t, "t", "set x kept")
	start := time.Now()
	r, err := e.Execute(context.Background(), api.Request{SessionID: "t", Code: "sleep 1m", Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, api.StatusTimeout, r.Status)
	assert.Less(t, time.Since(start), 5*time.Second)
	require.NotNil(t, r.Error)
	assert.Equal(t, "Timeout", r.Error.Ename, "the executor's verdict, not the KeyboardInterrupt output")
	assert.Contains(t, r.Error.Evalue, "exceeded its 200ms timeout")
	assert.Contains(t, r.Error.Evalue, "state is kept")
	assert.False(t, r.StateLost)
	assert.Equal(t, 2, r.ExecutionCount, "from the interrupted cell's reply")

	k := e.fakeKernel(t, b, "t")
	assert.Equal(t, 1, k.Interrupts())
	assert.Zero(t, k.Restarts())
	r = e.run(t, "t", "get x")
	assert.Equal(t, "kept", r.Result)
	assert.False(t, r.StateLost)
}

// A kernel that ignores the interrupt is restarted within the grace period: the
// timeout says the state is lost, and the next call finds it gone.
func TestFakeTimeoutInterruptIgnored(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, nil, nil)
	e.run(t, "t", "set x gone")
	start := time.Now()
	r, err := e.Execute(context.Background(), api.Request{SessionID: "t", Code: "hang", Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	took := time.Since(start)
	require.Equal(t, api.StatusTimeout, r.Status)
	assert.True(t, r.StateLost)
	assert.Contains(t, r.Error.Evalue, "did not stop within 300ms of an interrupt and was restarted")
	assert.Less(t, took, 5*time.Second)

	k := e.fakeKernel(t, b, "t")
	assert.Equal(t, 1, k.Interrupts())
	assert.Equal(t, 1, k.Restarts())
	r = e.run(t, "t", "get x")
	require.Equal(t, api.StatusError, r.Status)
	assert.Equal(t, "NameError", r.Error.Ename)
	assert.False(t, r.StateLost, "the timeout already said so")
	assert.Equal(t, 1, r.ExecutionCount, "a fresh interpreter counts from 1")
}

// A kernel that dies during a call: the call ends as kernel_died with the output
// before the death; the next call runs in the restarted kernel and says the state is
// lost.
func TestFakeKernelDiesMidCall(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, nil, nil)
	e.run(t, "d", "set x 1")
	r := e.run(t, "d", "print last words\ndie")
	require.Equal(t, api.StatusKernelDied, r.Status)
	assert.True(t, r.StateLost)
	assert.Equal(t, "last words\n", r.Stdout)
	assert.Equal(t, "KernelDied", r.Error.Ename)
	assert.Contains(t, r.Error.Evalue, "the process exited")
	info, err := e.Session("d")
	require.NoError(t, err)
	assert.Equal(t, "dead", string(info.State))

	r = e.run(t, "d", "get x")
	assert.Equal(t, "NameError", r.Error.Ename)
	assert.True(t, r.StateLost)
	assert.Contains(t, r.Notes, "state lost: the kernel died during an earlier call")
	assert.Len(t, b.placements(), 1, "the restarted kernel is reused")
	r = e.run(t, "d", "print ok")
	assert.False(t, r.StateLost, "said once")
}

// A WebSocket that drops for good while the kernel lives: the call ends with
// ConnectionLost and the state is kept; the next call reconnects.
func TestFakeConnectionDropKernelAlive(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, nil, nil)
	e.run(t, "c", "set x still here")
	k := e.fakeKernel(t, b, "c")
	r := e.run(t, "c", "print partial\ndrop")
	require.Equal(t, api.StatusError, r.Status, "%+v", r.Error)
	assert.Equal(t, "ConnectionLost", r.Error.Ename)
	assert.Contains(t, r.Error.Evalue, "the session's state is kept")
	assert.False(t, r.StateLost)

	k.Refuse(0)
	r = e.run(t, "c", "get x")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	assert.Equal(t, "still here", r.Result)
	assert.False(t, r.StateLost)
	assert.Len(t, b.placements(), 1)
}

// A server that goes away during a call: kernel_died, and the next call starts a
// kernel on a new placement and says the state is lost. The old placement is
// released.
func TestFakeServerGone(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, nil, nil)
	c := e.start(t, context.Background(), req("g", "sleep 1m"))
	waitCell(t, e, b, "g")
	b.placements()[0].srv.Close()
	r, err := c.wait(t)
	require.NoError(t, err)
	require.Equal(t, api.StatusKernelDied, r.Status)
	assert.Contains(t, r.Error.Evalue, "its server went away")
	assert.True(t, r.StateLost)

	r = e.run(t, "g", "print again")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	assert.True(t, r.StateLost)
	require.Len(t, b.placements(), 2)
	assert.True(t, b.placements()[0].isClosed())
}

// A call whose kernel goes idle without its execute_reply (ipykernel drops the
// reply of a request an interrupt reached outside the cell's code) ends within a
// few seconds as an error that says so, not at its timeout; the kernel and its
// state are kept. An interrupt asked while no code runs is not sent at all (it is
// what drops replies).
func TestFakeReplyLost(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, nil, nil)
	e.run(t, "t", "set x kept")
	k := e.fakeKernel(t, b, "t")
	require.NoError(t, e.Interrupt(context.Background(), "t"))
	assert.Zero(t, k.Interrupts(), "an idle kernel is not interrupted")

	start := time.Now()
	r, err := e.Execute(context.Background(), api.Request{SessionID: "t", Code: "set y 1\ndropreply", Timeout: time.Minute})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 10*time.Second, "ended by the lost reply, not the timeout")
	assert.Equal(t, api.StatusError, r.Status)
	require.NotNil(t, r.Error)
	assert.Equal(t, "ReplyLost", r.Error.Ename)
	assert.Contains(t, r.Error.Evalue, "may or may not have run")
	assert.False(t, r.StateLost)
	r = e.run(t, "t", "get x")
	assert.Equal(t, "kept", r.Result)
	assert.False(t, r.StateLost)
	assert.Zero(t, k.Restarts())
}
