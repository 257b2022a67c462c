package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
)

// Timeout counts the code's run only; MaxWait bounds the whole call (issue 25 item
// 6: a 2 s call queued behind a 6 s one returned ok after 5.7 s, and nothing let a
// caller bound its total wait).
func TestFakeMaxWait(t *testing.T) {
	t.Parallel()
	e, _ := newFakeEnv(t, nil, nil)
	e.run(t, "w", "set x 1")
	_, err := e.Execute(context.Background(), api.Request{SessionID: "w", Code: "set z 1", MaxWait: -time.Second})
	require.ErrorIs(t, err, api.ErrInvalidRequest, "a negative max wait")
	long := e.start(t, context.Background(), req("w", "sleep 3s"))
	time.Sleep(100 * time.Millisecond)

	// Queued past its max wait: it ends at the max wait and never runs.
	start := time.Now()
	r, err := e.Execute(context.Background(), api.Request{SessionID: "w", Code: "set y 1", MaxWait: time.Second, Timeout: 10 * time.Second})
	took := time.Since(start)
	require.NoError(t, err)
	assert.Equal(t, api.StatusTimeout, r.Status)
	assert.Contains(t, r.Error.Evalue, "did not run")
	assert.InDelta(t, time.Second.Seconds(), took.Seconds(), 0.5, "ends at its max wait")

	// Without one, a call's timeout counts only its run: queued behind the 3 s
	// call, a 1 s-timeout call that runs briefly is ok.
	start = time.Now()
	r, err = e.Execute(context.Background(), api.Request{SessionID: "w", Code: "print ok", Timeout: time.Second})
	require.NoError(t, err)
	assert.Equal(t, api.StatusOK, r.Status)
	assert.Greater(t, time.Since(start), 1500*time.Millisecond, "it waited for the long call")
	_, err = long.wait(t)
	require.NoError(t, err)

	r = e.run(t, "w", "get y")
	assert.Equal(t, "NameError", r.Error.Ename, "the timed-out queued call never ran")

	// Started with part of its max wait used: the run gets only what is left.
	long = e.start(t, context.Background(), req("w", "sleep 1s"))
	time.Sleep(100 * time.Millisecond)
	start = time.Now()
	r, err = e.Execute(context.Background(), api.Request{SessionID: "w", Code: "sleep 10s", MaxWait: 2 * time.Second, Timeout: 30 * time.Second})
	took = time.Since(start)
	require.NoError(t, err)
	assert.Equal(t, api.StatusTimeout, r.Status)
	assert.Contains(t, r.Error.Evalue, "max wait of 2s")
	assert.Less(t, took, 4*time.Second)
	_, _ = long.wait(t)
	r = e.run(t, "w", "get x")
	assert.Equal(t, "1", r.Result, "an interrupted run keeps the state")
}
