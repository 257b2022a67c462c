package executor_test

// Sessions' lives on the fake backend: overload, the warm pool, closing, canceling,
// reset and backend failures.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
)

// Past MaxSessions a new session is refused with a statement of fact; closing one
// makes room.
func TestFakeTooManySessions(t *testing.T) {
	t.Parallel()
	e, _ := newFakeEnv(t, nil, func(o *executor.Options) { o.MaxSessions = 2 })
	e.run(t, "a", "print a")
	e.run(t, "b", "print b")
	_, err := e.Execute(context.Background(), req("c", "print c"))
	require.ErrorIs(t, err, api.ErrTooManySessions)
	assert.Equal(t, "too many sessions: 2 sessions are live, the limit; close one, or wait for idle sessions to be closed", err.Error())
	assert.NotContains(t, err.Error(), "--", "no CLI advice from the library")
	assert.NotContains(t, err.Error(), "/v1/", "no HTTP advice from the library")

	require.NoError(t, e.CloseSession(context.Background(), "a"))
	r := e.run(t, "c", "print c")
	assert.Equal(t, api.StatusOK, r.Status)
}

// A new session takes a warm kernel (started before the call) and the pool refills.
func TestFakeWarmPool(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, nil, func(o *executor.Options) { o.Warm = 2 })
	require.Eventually(t, func() bool { return e.WarmReady() == 2 }, 10*time.Second, 10*time.Millisecond)
	warm := map[string]bool{}
	for _, p := range b.placements() {
		for _, k := range p.srv.Kernels() {
			warm[k.ID] = true
		}
	}
	require.Len(t, warm, 2)

	r := e.run(t, "w", "set x 1\nget x")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	assert.False(t, r.StateLost)
	info, err := e.Session("w")
	require.NoError(t, err)
	assert.True(t, warm[info.KernelID], "the session got a warm kernel")
	require.Eventually(t, func() bool { return e.WarmReady() == 2 }, 10*time.Second, 10*time.Millisecond, "refilled")
	assert.Len(t, b.placements(), 3)
}

// Closing a session during a call ends the call and fails the calls queued behind
// it with api.ErrSessionClosed; the kernel's placement is released.
func TestFakeCloseSessionDuringCall(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, nil, nil)
	running := e.start(t, context.Background(), req("x", "hang"))
	waitCell(t, e, b, "x")
	queued := e.start(t, context.Background(), req("x", "print never"))
	queued.waitStatus(t, "queued")

	require.NoError(t, e.CloseSession(context.Background(), "x"))
	for i, c := range []*call{running, queued} {
		r, err := c.wait(t)
		require.ErrorIs(t, err, api.ErrSessionClosed, "call %d: %+v", i, r)
	}
	assert.True(t, b.placements()[0].isClosed())
	_, err := e.Session("x")
	require.ErrorIs(t, err, api.ErrNotFound)
}

// Closing the executor during a call ends it; later calls get api.ErrClosed.
func TestFakeCloseExecutorDuringCall(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, nil, nil)
	running := e.start(t, context.Background(), req("x", "hang"))
	waitCell(t, e, b, "x")
	start := time.Now()
	require.NoError(t, e.Close())
	assert.Less(t, time.Since(start), 5*time.Second)
	_, err := running.wait(t)
	require.ErrorIs(t, err, api.ErrSessionClosed)
	_, err = e.Execute(context.Background(), req("x", "print late"))
	require.ErrorIs(t, err, api.ErrClosed)
	for _, p := range b.placements() {
		assert.True(t, p.isClosed())
	}
}

// A caller that gives up on a running call gets a timeout result saying so (the
// kernel honoured the interrupt: state kept); one that gives up while its call is
// queued gets its context's error at once, and the call never runs.
func TestFakeCallerCancels(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, nil, nil)
	e.run(t, "x", "set x kept")
	ctx, cancel := context.WithCancel(context.Background())
	running := e.start(t, ctx, req("x", "sleep 1m"))
	waitCell(t, e, b, "x")
	qctx, qcancel := context.WithCancel(context.Background())
	queued := e.start(t, qctx, req("x", "set x overwritten"))
	queued.waitStatus(t, "queued")
	qcancel()
	_, err := queued.wait(t)
	require.ErrorIs(t, err, context.Canceled)
	running.pending(t)

	cancel()
	r, err := running.wait(t)
	require.NoError(t, err)
	require.Equal(t, api.StatusTimeout, r.Status)
	assert.Contains(t, r.Error.Evalue, "the caller canceled the call")
	assert.False(t, r.StateLost)
	assert.Equal(t, "kept", e.run(t, "x", "get x").Result, "the canceled queued call never ran")
}

// ResetSession gives the session a fresh interpreter; its files stay.
func TestFakeReset(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, nil, nil)
	e.run(t, "r", "set x 1")
	require.NoError(t, e.ResetSession(context.Background(), "r"))
	assert.Equal(t, 1, e.fakeKernel(t, b, "r").Restarts())
	r := e.run(t, "r", "get x")
	assert.Equal(t, "NameError", r.Error.Ename)
	assert.Equal(t, 1, r.ExecutionCount)
}

// fakeStartError is a backend's own typed error.
type fakeStartError struct{ image string }

func (e *fakeStartError) Error() string { return "no such image " + e.image }

// A backend that cannot place a session: api.ErrBackend, with the backend's typed error
// still reachable; the next call tries again.
func TestFakeBackendErrorKeepsCause(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, nil, nil)
	b.setOpenErr(fmt.Errorf("create container: %w", &fakeStartError{image: "missing:latest"}))
	_, err := e.Execute(context.Background(), req("b", "print hi"))
	require.ErrorIs(t, err, api.ErrBackend)
	var se *fakeStartError
	require.True(t, errors.As(err, &se), "typed cause lost: %v", err)
	assert.Equal(t, "missing:latest", se.image)
	assert.Contains(t, err.Error(), `start kernel for session "b" on fake: create container: no such image missing:latest`)

	b.setOpenErr(nil)
	r := e.run(t, "b", "print hi")
	assert.Equal(t, api.StatusOK, r.Status)
}

// A call refused after the session's kernel was replaced (here: a bad input) leaves
// the state_lost report for the next call that runs.
func TestFakeStateLostReportSurvivesRefusedCall(t *testing.T) {
	t.Parallel()
	e, _ := newFakeEnv(t, nil, nil)
	e.run(t, "s", "set x 1")
	require.Equal(t, api.StatusKernelDied, e.run(t, "s", "die").Status)
	dir := filepath.Join(e.Data, "adir")
	require.NoError(t, os.Mkdir(dir, 0o755))
	_, err := e.Execute(context.Background(), api.Request{SessionID: "s", Code: "print hi", Inputs: []string{dir}})
	require.ErrorIs(t, err, api.ErrInvalidRequest)

	r := e.run(t, "s", "print hi")
	assert.True(t, r.StateLost, "the report was not lost with the refused call")
	assert.Contains(t, r.Notes, "state lost: the kernel died during an earlier call")
}

// A kernel restarted behind kernelbox's back (here over the server's REST API by
// another client, for which Jupyter Server sends no status) is found by its
// execution count going back: the call says the state is gone.
func TestFakeRestartBehindOurBack(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, nil, nil)
	e.run(t, "r", "set x 1")
	e.run(t, "r", "get x")
	info, err := e.Session("r")
	require.NoError(t, err)
	p := b.placementOf(info.KernelID)
	require.NotNil(t, p)
	c, err := jupyter.NewClient(p.srv.Endpoint(), nil)
	require.NoError(t, err)
	_, err = c.Restart(context.Background(), info.KernelID)
	require.NoError(t, err)

	r := e.run(t, "r", "get x")
	assert.Equal(t, api.StatusError, r.Status, "x is gone")
	assert.True(t, r.StateLost, "the restart must be told")
	assert.Contains(t, fmt.Sprint(r.Notes), "execution count went from 2 back to 1")
	r = e.run(t, "r", "set y 2")
	assert.False(t, r.StateLost, "told once")
}
