package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/executor"
)

// replacingBackend is a fakeBackend whose placements are ResetReplacers, as the
// docker backend's containers are.
type replacingBackend struct{ *fakeBackend }

func (b replacingBackend) Open(ctx context.Context, spec executor.SessionSpec) (executor.Placement, error) {
	p, err := b.fakeBackend.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	return replacingPlacement{p}, nil
}

type replacingPlacement struct{ executor.Placement }

func (replacingPlacement) ReplaceOnReset() bool { return true }

// A reset on a ResetReplacer placement closes it and starts the kernel on a new one;
// the next call sees a fresh interpreter and no state_lost report.
func TestFakeResetReplaces(t *testing.T) {
	t.Parallel()
	b := newFakeBackend(t)
	e := newEnvOn(t, replacingBackend{b}, func(o *executor.Options) {
		o.StartTimeout = 10 * time.Second
		o.ShutdownTimeout = 5 * time.Second
	})
	e.run(t, "r", "set x 1")
	require.NoError(t, e.ResetSession(context.Background(), "r"))
	ps := b.placements()
	require.Len(t, ps, 2, "reset opens a new placement")
	ps[0].mu.Lock()
	closed := ps[0].closed
	ps[0].mu.Unlock()
	require.True(t, closed, "reset closes the old placement")
	require.Equal(t, 0, e.fakeKernel(t, b, "r").Restarts(), "the new kernel is not a restarted one")

	r := e.run(t, "r", "get x")
	require.Equal(t, "NameError", r.Error.Ename)
	require.Equal(t, 1, r.ExecutionCount)
	require.False(t, r.StateLost, "a reset is not lost state: %v", r.Notes)
}
