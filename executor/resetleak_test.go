package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
)

// TestLocalResetAfterDeathLeaksNothing: a reset right after the kernel died (while
// its server restarts it) leaves the session exactly one kernel, every time, and a
// close after a death leaves none (issue 33 item 1: each reset used to leak one).
func TestLocalResetAfterDeathLeaksNothing(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newOwnEnv(t, nil)
	ctx := context.Background()
	const rounds = 20
	for i := range rounds {
		r := e.run(t, "rd", "x = 1\nimport os; os._exit(1)")
		require.Equal(t, api.StatusKernelDied, r.Status, "round %d: %+v", i, r.Error)
		require.NoError(t, e.ResetSession(ctx, "rd"), "round %d", i)
	}
	r := e.run(t, "rd", "'x' in dir()")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "False", r.Result)
	require.Eventually(t, func() bool { return len(e.Backend.Kernels()) == 1 }, 20*time.Second, 200*time.Millisecond,
		"after %d deaths and resets of one session: %d kernel processes, want 1", rounds, len(e.Backend.Kernels()))

	for i := range rounds {
		id := "cd" + string(rune('a'+i))
		r := e.run(t, id, "import os; os._exit(1)")
		require.Equal(t, api.StatusKernelDied, r.Status, "round %d: %+v", i, r.Error)
		require.NoError(t, e.CloseSession(ctx, id), "round %d", i)
	}
	require.NoError(t, e.CloseSession(ctx, "rd"))
	require.Eventually(t, func() bool { return len(e.Backend.Kernels()) == 0 }, 20*time.Second, 200*time.Millisecond,
		"after every session was closed: %d kernel processes, want 0", len(e.Backend.Kernels()))
}

// TestLocalDeathsInARow: a kernel that dies at every call, more times in a row than
// its server's restarter allows (5 within 10 s: the server then gives it up and
// removes it), still reports each death, and the next call runs on a new kernel
// instead of hanging until its timeout.
func TestLocalDeathsInARow(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newOwnEnv(t, nil)
	for i := range 8 {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		r, err := e.Execute(ctx, api.Request{SessionID: "dr", Code: "import os; os._exit(1)"})
		cancel()
		require.NoError(t, err, "round %d", i)
		require.Equal(t, api.StatusKernelDied, r.Status, "round %d: %+v", i, r.Error)
	}
	r := e.run(t, "dr", "1 + 1")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "2", r.Result)
	require.NoError(t, e.CloseSession(context.Background(), "dr"))
	require.Eventually(t, func() bool { return len(e.Backend.Kernels()) == 0 }, 20*time.Second, 200*time.Millisecond,
		"after the session was closed: %d kernel processes, want 0", len(e.Backend.Kernels()))
}
