package executor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// Issue 33, item 6, on real kernels: a template whose preload hangs (warm 1) beside
// a good one (warm 2). Before, the hung warm start held the server's one warm-start
// turn for the whole start timeout (2 minutes): the good template had no warm kernel
// for 125 s. Now it gives the turn up after WarmTurn (5 s) and the good pool fills and
// refills while the hung preload goes on. A call on a template whose preload hangs
// fails at its preload timeout, saying so.
func TestLocalHungPreloadBesideGoodPool(t *testing.T) {
	const hang = "import time\ntime.sleep(3600)"
	t0 := time.Now()
	e := newEnv(t, func(o *executor.Options) {
		o.Templates = []executor.Template{
			{Name: "hang", Preload: hang, Warm: 1, PreloadTimeout: 90 * time.Second},
			{Name: "good", Preload: "import json", Warm: 2},
			{Name: "stuck", Preload: hang, PreloadTimeout: 3 * time.Second},
		}
	})
	var first time.Duration
	require.Eventually(t, func() bool {
		n := e.WarmReadyOf("good")
		if n >= 1 && first == 0 {
			first = time.Since(t0)
		}
		return n == 2
	}, 40*time.Second, 20*time.Millisecond, "the good template's pool did not fill beside the hung preload")
	full := time.Since(t0)
	t.Logf("good template: first warm kernel ready after %s, both after %s (WarmTurn %s)",
		first.Round(time.Millisecond), full.Round(time.Millisecond), executor.DefaultWarmTurn)
	require.Equal(t, 0, e.WarmReadyOf("hang"))

	// Take one: it is refilled while the hung preload goes on.
	r, err := e.Execute(context.Background(), api.Request{SessionID: "g", Template: "good", Code: "json.dumps([1])"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "'[1]'", r.Result)
	t1 := time.Now()
	require.Eventually(t, func() bool { return e.WarmReadyOf("good") == 2 }, 40*time.Second, 20*time.Millisecond,
		"the good template's pool was not refilled beside the hung preload")
	t.Logf("good template: refilled %s after a session took a warm kernel", time.Since(t1).Round(time.Millisecond))
	require.Less(t, time.Since(t0), 90*time.Second, "the refill waited for the hung preload's timeout")

	// A call on a template whose preload hangs, with a 5 s timeout: it fails at the
	// template's preload timeout (3 s), naming it.
	t2 := time.Now()
	_, err = e.Execute(context.Background(), api.Request{SessionID: "s", Template: "stuck", Code: "1", Timeout: 5 * time.Second})
	took := time.Since(t2)
	require.ErrorIs(t, err, api.ErrBackend)
	var te *executor.PreloadTimeoutError
	require.True(t, errors.As(err, &te), "%v", err)
	require.Contains(t, err.Error(), `template "stuck": preload timed out after 3s (the template's preload_timeout)`)
	t.Logf("a call on the stuck template failed after %s: %v", took.Round(time.Millisecond), err)
	require.Less(t, took, 30*time.Second)
}
