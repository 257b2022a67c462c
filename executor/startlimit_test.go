package executor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// gatedBackend holds every Open until the test lets one through, and counts the
// Opens in flight; as a StartLimiter it asks for limit starts at once.
type gatedBackend struct {
	*fakeBackend
	limit int
	gate  chan struct{}

	mu       sync.Mutex
	in, peak int
}

var _ executor.StartLimiter = (*gatedBackend)(nil)

func (b *gatedBackend) MaxStarting() int { return b.limit }

func (b *gatedBackend) Open(ctx context.Context, spec executor.SessionSpec) (executor.Placement, error) {
	b.mu.Lock()
	b.in++
	b.peak = max(b.peak, b.in)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.in--
		b.mu.Unlock()
	}()
	select {
	case <-b.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.fakeBackend.Open(ctx, spec)
}

func (b *gatedBackend) inFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.in
}

// TestStartLimit: with a backend that asks for at most 2 starts at once (or
// Options.MaxStarting), a burst of 5 sessions has at most 2 kernels starting at
// any time, and every session still gets its kernel as slots free up; a start
// that cannot get a slot within its call's max wait is not run and says why.
func TestStartLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		backend int // the backend's StartLimiter
		option  int // Options.MaxStarting
		want    int // starts at once
	}{
		{"backend asks 2", 2, 0, 2},
		{"option overrides", 4, 2, 2},
		{"negative option is no limit", 2, -1, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := &gatedBackend{fakeBackend: newFakeBackend(t), limit: tc.backend, gate: make(chan struct{})}
			e := newEnvOn(t, b, func(o *executor.Options) {
				o.StartTimeout = 30 * time.Second
				o.MaxStarting = tc.option
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const n = 5
			errs := make(chan error, n)
			for i := 0; i < n; i++ {
				go func() {
					res, err := e.Execute(ctx, api.Request{SessionID: fmt.Sprintf("s%d", i), Code: "1"})
					if err == nil && res.Status != api.StatusOK {
						err = fmt.Errorf("status %s: %+v", res.Status, res.Error)
					}
					errs <- err
				}()
			}
			require.Eventually(t, func() bool { return b.inFlight() == tc.want }, 10*time.Second, time.Millisecond)
			time.Sleep(200 * time.Millisecond) // no further start begins while the slots are taken
			require.Equal(t, tc.want, b.inFlight())
			for i := 0; i < n; i++ {
				b.gate <- struct{}{}
			}
			for i := 0; i < n; i++ {
				require.NoError(t, <-errs)
			}
			require.Equal(t, tc.want, b.peak)
		})
	}

	t.Run("bounded wait", func(t *testing.T) {
		t.Parallel()
		b := &gatedBackend{fakeBackend: newFakeBackend(t), limit: 1, gate: make(chan struct{})}
		e := newEnvOn(t, b, func(o *executor.Options) { o.StartTimeout = 30 * time.Second })
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		first := make(chan error, 1)
		go func() {
			_, err := e.Execute(ctx, api.Request{SessionID: "holder", Code: "1"})
			first <- err
		}()
		require.Eventually(t, func() bool { return b.inFlight() == 1 }, 10*time.Second, time.Millisecond)
		res, err := e.Execute(ctx, api.Request{SessionID: "waiter", Code: "1", MaxWait: 300 * time.Millisecond})
		require.NoError(t, err)
		require.Equal(t, api.StatusTimeout, res.Status, "%+v", res)
		require.Len(t, res.Notes, 1)
		require.Contains(t, res.Notes[0], "kernel start slots")
		b.gate <- struct{}{}
		require.NoError(t, <-first)
	})
}
