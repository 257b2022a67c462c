package executor_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
)

// Calls, resets and closes of one session raced hundreds of times: each ends at
// once (a result, or session_closed), and a session that is live afterwards has its
// directory with outputs/ (issue 25 item 3: the finishing close deleted the new
// incarnation's directory, and its next call ran with no outputs/).
func TestFakeCloseRace(t *testing.T) {
	t.Parallel()
	e, _ := newFakeEnv(t, func(b *fakeBackend) { b.closeDelay = 20 * time.Millisecond }, nil)
	const id = "race"
	dir := filepath.Join(e.WS.Root(), "sessions", id)
	var slowest time.Duration
	var mu sync.Mutex
	timed := func(f func()) {
		start := time.Now()
		f()
		mu.Lock()
		slowest = max(slowest, time.Since(start))
		mu.Unlock()
	}
	for i := range 300 {
		var wg sync.WaitGroup
		wg.Add(4)
		execute := func(delay time.Duration) {
			defer wg.Done()
			time.Sleep(delay)
			timed(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				r, err := e.Execute(ctx, req(id, "set x 1\nprint hi"))
				if err != nil {
					require.ErrorIs(t, err, api.ErrSessionClosed, "round %d", i)
					return
				}
				require.Contains(t, []api.Status{api.StatusOK, api.StatusTimeout, api.StatusKernelDied}, r.Status, "round %d: %+v", i, r.Error)
			})
		}
		go execute(0)
		// One more arrives while the close is tearing the kernel down.
		go execute(time.Duration(rand.IntN(25000)) * time.Microsecond)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
			timed(func() {
				err := e.CloseSession(context.Background(), id)
				if err != nil && !errors.Is(err, api.ErrNotFound) {
					t.Errorf("round %d: close: %v", i, err)
				}
			})
		}()
		go func() {
			defer wg.Done()
			if i%3 != 0 {
				return
			}
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
			timed(func() { _ = e.ResetSession(context.Background(), id) })
		}()
		wg.Wait()
		if _, err := e.Session(id); err == nil {
			_, err := os.Stat(filepath.Join(dir, "outputs"))
			require.NoError(t, err, "round %d: a live session must have its directory", i)
		}
	}
	r := e.run(t, id, "print done")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	_, err := os.Stat(filepath.Join(dir, "outputs"))
	require.NoError(t, err)
	t.Logf("slowest operation in 300 rounds: %s", slowest)
	require.Less(t, slowest, 5*time.Second)
}
