package calls_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
)

// TestRunOnCaller: Run runs the call on the caller's goroutine and returns once
// it has ended, but the call is the registry's as with Start: listed, followed
// and cancelled by others while it runs, not cancelled with the caller's ctx,
// and refused once the registry is closed.
func TestRunOnCaller(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, gated(1, make(chan struct{})), calls.Options{})
	ctx, cancelCaller := context.WithCancel(context.Background())
	type ran struct {
		c   *calls.Call
		err error
	}
	done := make(chan ran, 1)
	go func() {
		c, err := r.Run(ctx, api.Request{SessionID: "s", Code: "x"})
		done <- ran{c, err}
	}()
	var c *calls.Call
	require.Eventually(t, func() bool {
		list := r.List("s")
		if len(list) == 1 && list[0].Info(false, false).State == api.CallRunning {
			c = list[0]
			return true
		}
		return false
	}, 5*time.Second, 5*time.Millisecond, "the call is registered and running while Run blocks")
	cancelCaller() // the caller going away does not end the call
	select {
	case <-c.Done():
		t.Fatal("the call ended with its caller's context")
	case <-time.After(200 * time.Millisecond):
	}
	got, err := r.Get(c.ID())
	require.NoError(t, err)
	require.Same(t, c, got)
	require.NoError(t, r.Cancel(c.ID()))
	var res ran
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the call was cancelled")
	}
	require.NoError(t, res.err)
	require.Same(t, c, res.c)
	final, err := c.Final()
	require.NoError(t, err)
	assert.Equal(t, api.StatusTimeout, final.Status)
	assert.True(t, c.Info(false, false).Cancelled)

	require.NoError(t, r.Close())
	_, err = r.Run(context.Background(), api.Request{SessionID: "s", Code: "x"})
	assert.ErrorIs(t, err, api.ErrClosed)
}
