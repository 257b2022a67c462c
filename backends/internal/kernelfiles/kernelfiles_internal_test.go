package kernelfiles

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/kernelfs"
)

// The zero Loss is not lost; the first Lose wins, however many race, and its
// reason stays.
func TestLoss(t *testing.T) {
	t.Parallel()
	var l Loss
	assert.Empty(t, l.Reason())
	select {
	case <-l.Done():
		t.Fatal("Done is closed before Lose")
	default:
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l.Lose("gateway g left the rotation") {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), wins.Load())
	assert.False(t, l.Lose("again"))
	assert.Equal(t, "gateway g left the rotation", l.Reason())
	<-l.Done()

	var empty Loss
	require.True(t, empty.Lose(""))
	assert.NotEmpty(t, empty.Reason(), "a loss always says something")
}

// Once its placement is lost, every file call fails with the reason, before it
// touches the connection (the executor is moving the session).
func TestFilesAfterLoss(t *testing.T) {
	t.Parallel()
	var l Loss
	f := New(kernelfs.Options{}, 0, &l)
	assert.Equal(t, l.Done(), f.Lost())
	l.Lose("the session's task on vm1 is gone")
	ctx := context.Background()
	assert.EqualError(t, f.PushInputs(ctx, nil, t.TempDir(), nil), "the session's task on vm1 is gone")
	assert.EqualError(t, f.PullOutputs(ctx, nil, t.TempDir(), nil), "the session's task on vm1 is gone")
	_, err := f.KernelFiles(nil, executor.FileLimits{})
	assert.EqualError(t, err, "the session's task on vm1 is gone")
	assert.Empty(t, f.KernelID(), "no kernel was reached")
	<-f.Lost()
}

// The workspace's disk quota is the session's budget when there is one, else the
// placement's own budget (0 leaves it to kernelfs.Options.MaxSessionBytes).
func TestLimits(t *testing.T) {
	t.Parallel()
	var l Loss
	swarm := New(kernelfs.Options{}, 1<<30, &l)
	assert.Equal(t, kernelfs.Limits{MaxFileBytes: 5, MaxSessionBytes: 1 << 30}, swarm.limits(executor.FileLimits{MaxFileBytes: 5}))
	assert.Equal(t, kernelfs.Limits{MaxFileBytes: 5, MaxSessionBytes: 7}, swarm.limits(executor.FileLimits{MaxFileBytes: 5, MaxSessionBytes: 7}))
	remote := New(kernelfs.Options{}, 0, &l)
	assert.Equal(t, kernelfs.Limits{MaxFileBytes: 5}, remote.limits(executor.FileLimits{MaxFileBytes: 5}))
}
