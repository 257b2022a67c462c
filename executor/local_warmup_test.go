package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// Issue 53: a warm kernel's warm-up (warm.go) leaves no trace a session can
// see: its first call has execution count 1, `_` and Out are empty and the
// history holds only that call.
func TestLocalWarmUpLeavesNoTrace(t *testing.T) {
	e := newEnv(t, func(o *executor.Options) { o.Warm = 1 })
	require.Eventually(t, func() bool { return e.WarmReady() == 1 }, 60*time.Second, 20*time.Millisecond)
	r, err := e.Execute(context.Background(), api.Request{SessionID: "w", Code: "(repr(_), len(Out), len(In))"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, `("''", 0, 2)`, r.Result, "the warm-up left a value or a history entry")
	require.Equal(t, 1, r.ExecutionCount)
}
