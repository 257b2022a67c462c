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

// Real kernels: a call and a close of its session raced, with a second call arriving
// while the close tears the kernel down. Every operation ends within seconds (it took
// 120 s and ended in "connect to kernel ...: 500" when the close deleted the new
// incarnation's directory), and the session afterwards runs in its own directory.
func TestLocalCloseRace(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newEnv(t, nil)
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
	execute := func(round int, delay time.Duration) {
		time.Sleep(delay)
		timed(func() {
			r, err := e.Execute(context.Background(), api.Request{SessionID: id, Code: "import os; x = 1; print(os.getcwd())", Timeout: 5 * time.Second})
			if err != nil {
				require.ErrorIs(t, err, api.ErrSessionClosed, "round %d", round)
				return
			}
			require.Equal(t, api.StatusOK, r.Status, "round %d: %+v", round, r.Error)
			require.Equal(t, dir+"\n", r.Stdout, "round %d: the call runs in its session's directory", round)
		})
	}
	for i := range 8 {
		var wg sync.WaitGroup
		wg.Add(3)
		go func() { defer wg.Done(); execute(i, 0) }()
		go func() { defer wg.Done(); execute(i, time.Duration(200+rand.IntN(800))*time.Millisecond) }()
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond)
			timed(func() {
				if err := e.CloseSession(context.Background(), id); err != nil && !errors.Is(err, api.ErrNotFound) {
					t.Errorf("round %d: close: %v", i, err)
				}
			})
		}()
		wg.Wait()
		if _, err := e.Session(id); err == nil {
			_, err := os.Stat(filepath.Join(dir, "outputs"))
			require.NoError(t, err, "round %d: a live session has its directory", i)
		}
	}
	r := e.run(t, id, "import os; print(os.getcwd(), os.path.isdir('outputs'))")
	require.Equal(t, dir+" True\n", r.Stdout)
	t.Logf("slowest operation in 8 rounds: %s", slowest)
	require.Less(t, slowest, 20*time.Second)
}
