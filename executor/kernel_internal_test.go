package executor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// blockingPlacement's Close waits for its context to end and records what it saw.
type blockingPlacement struct {
	called   bool
	doneAtIn bool          // the context was done when Close was called
	took     time.Duration // until the context ended
}

func (p *blockingPlacement) Server() Server { return Server{} }

func (p *blockingPlacement) Close(ctx context.Context) error {
	p.called, p.doneAtIn = true, ctx.Err() != nil
	start := time.Now()
	<-ctx.Done()
	p.took = time.Since(start)
	return nil
}

// kernel.shutdown is bounded by the sooner of its bound and its context's deadline,
// and still tears down (for the whole bound) when its context is already done or is
// canceled meanwhile: a container must not outlive its session.
func TestFakeShutdownHonoursContext(t *testing.T) {
	t.Parallel()
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	soon, cancelSoon := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelSoon()
	canceledLater, cancelLater := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancelLater)
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		bound    time.Duration
		min, max time.Duration
	}{
		{"deadline sooner than the bound", soon, 5 * time.Second, 50 * time.Millisecond, 2 * time.Second},
		{"bound sooner than the deadline", context.Background(), 200 * time.Millisecond, 150 * time.Millisecond, 2 * time.Second},
		{"context already done", expired, 200 * time.Millisecond, 150 * time.Millisecond, 2 * time.Second},
		{"context canceled during teardown", canceledLater, 300 * time.Millisecond, 250 * time.Millisecond, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &blockingPlacement{}
			k := &kernel{placement: p}
			require.NoError(t, k.shutdown(tc.ctx, tc.bound))
			require.True(t, p.called)
			assert.False(t, p.doneAtIn, "teardown gets a live context")
			assert.GreaterOrEqual(t, p.took, tc.min)
			assert.Less(t, p.took, tc.max)
		})
	}
}
