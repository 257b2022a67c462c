package executor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// early is a fakeBackend whose placements are EarlyAdopters with an Adopt that
// blocks until release is closed (a slow container rename).
type early struct {
	*fakeBackend
	release chan struct{}

	mu      sync.Mutex
	now     []string // AdoptNow's sessions, in order
	adopted []string // Adopt's sessions, once each returned
}

func (b *early) Open(ctx context.Context, spec executor.SessionSpec) (executor.Placement, error) {
	p, err := b.fakeBackend.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &earlyPlacement{Placement: p, b: b}, nil
}

type earlyPlacement struct {
	executor.Placement
	b *early
}

func (p *earlyPlacement) AdoptNow(session string) {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	p.b.now = append(p.b.now, session)
}

func (p *earlyPlacement) Adopt(ctx context.Context, session string) error {
	select {
	case <-p.b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	p.b.adopted = append(p.b.adopted, session)
	return nil
}

func (b *early) seen() (now, adopted []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.now...), append([]string(nil), b.adopted...)
}

// Issue 53: an EarlyAdopter's AdoptNow runs before the taking session's first
// call, and its slow Adopt beside it: the first result does not wait for the
// Adopt, which still ends (and Close waits for it).
func TestWarmEarlyAdopterNotOnFirstCall(t *testing.T) {
	b := &early{fakeBackend: newFakeBackend(t), release: make(chan struct{})}
	e := newEnvOn(t, b, func(o *executor.Options) {
		o.StartTimeout = 10 * time.Second
		o.Templates = []executor.Template{{Name: "pooled", Warm: 1}}
	})
	require.Eventually(t, func() bool { return e.WarmReadyOf("pooled") == 1 }, 10*time.Second, 10*time.Millisecond)
	r, err := e.Execute(context.Background(), api.Request{SessionID: "taker", Code: "print hi", Template: "pooled"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status)
	now, adopted := b.seen()
	require.Equal(t, []string{"taker"}, now, "AdoptNow before the first call")
	require.Empty(t, adopted, "the first result came while Adopt was still blocked")
	close(b.release)
	require.Eventually(t, func() bool { _, a := b.seen(); return len(a) == 1 }, 10*time.Second, 10*time.Millisecond)
	_, adopted = b.seen()
	require.Equal(t, []string{"taker"}, adopted)
}

// An Adopt that never ends is bounded (5 s), and Close waits for it rather
// than closing the backend under it.
func TestWarmEarlyAdopterBoundedAtClose(t *testing.T) {
	b := &early{fakeBackend: newFakeBackend(t), release: make(chan struct{})}
	e := newEnvOn(t, b, func(o *executor.Options) {
		o.StartTimeout = 10 * time.Second
		o.Templates = []executor.Template{{Name: "pooled", Warm: 1}}
	})
	require.Eventually(t, func() bool { return e.WarmReadyOf("pooled") == 1 }, 10*time.Second, 10*time.Millisecond)
	_, err := e.Execute(context.Background(), api.Request{SessionID: "taker", Code: "print hi", Template: "pooled"})
	require.NoError(t, err)
	t0 := time.Now()
	require.NoError(t, e.Close())
	took := time.Since(t0)
	_, adopted := b.seen()
	require.Empty(t, adopted, "the blocked Adopt was cut by its bound")
	require.Less(t, took, 30*time.Second)
	t.Logf("Close took %s with an Adopt blocked", took.Round(time.Millisecond))
}
