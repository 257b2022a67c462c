package executor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

func TestLocalServerDeathMidCell(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newOwnEnv(t, nil)
	e.run(t, "victim", "x = 1")
	e.run(t, "bystander", "y = 2")
	b := e.Backend
	pid := b.ServerPID()
	require.NotZero(t, pid)

	done := make(chan *api.Result, 1)
	go func() {
		r, err := e.Execute(context.Background(), api.Request{SessionID: "victim", Code: "import time\ntime.sleep(30)"})
		require.NoError(t, err)
		done <- r
	}()
	time.Sleep(time.Second)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	select {
	case r := <-done:
		require.Equal(t, api.StatusKernelDied, r.Status, "%+v", r.Error)
		require.True(t, r.StateLost)
		require.Contains(t, r.Error.Evalue, "server")
	case <-time.After(20 * time.Second):
		t.Fatal("the call did not return after the server was killed")
	}
	// Both sessions recover on a new server, each told its state is gone.
	for _, id := range []string{"victim", "bystander"} {
		r := e.run(t, id, "1 + 1")
		require.Equal(t, api.StatusOK, r.Status, "%s: %+v", id, r.Error)
		require.True(t, r.StateLost, id)
	}
	require.NotEqual(t, pid, b.ServerPID())
}

func TestLocalOutputFlood(t *testing.T) {
	e := newEnv(t, nil)
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak {
				peak = ms.HeapInuse
			}
		}
	}()
	for _, code := range []string{
		`print("x" * 200_000_000)`,
		`for i in range(1_000_000): print(f"line {i:07d} " + "." * 40)`,
	} {
		r := e.run(t, "flood", code)
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		require.True(t, r.Truncated)
		require.Contains(t, r.TruncationNote, "dropped")
		require.LessOrEqual(t, len(r.Stdout), 8<<20)
		require.Greater(t, len(r.Stdout), 1<<20)
	}
	close(stop)
	wg.Wait()
	t.Logf("peak Go heap in use while cells printed 200 MB and 54 MB: %.1f MB", float64(peak)/(1<<20))
	// Bounded by the connection's message cap (33 MiB), not by the 200 MB message.
	require.Less(t, peak, uint64(192<<20), "executor memory must stay bounded")
	// The session still works.
	require.Equal(t, "2", e.run(t, "flood", "1 + 1").Result)
}

func TestLocalConcurrency(t *testing.T) {
	e := newOwnEnv(t, func(o *executor.Options) { o.QueueSize = 32 })
	// The shared Jupyter server (and its two goroutines) lives as long as the
	// backend: start it before counting.
	e.run(t, "warmup", "1")
	require.NoError(t, e.CloseSession(context.Background(), "warmup"))
	before := runtime.NumGoroutine()
	const sessions, calls = 20, 20
	if testenv.Short() {
		t.Skip("long")
	}
	var wg sync.WaitGroup
	errs := make(chan error, sessions*calls)
	for s := 0; s < sessions; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("c%02d", s)
			for c := 0; c < calls; c++ {
				r, err := e.Execute(context.Background(), api.Request{SessionID: id,
					Code: fmt.Sprintf("n = globals().get('n', 0) + 1\nprint('%s', n)", id)})
				if err != nil {
					errs <- err
					return
				}
				if want := fmt.Sprintf("%s %d\n", id, c+1); r.Stdout != want {
					errs <- fmt.Errorf("session %s call %d: got %q, want %q", id, c, r.Stdout, want)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Concurrent calls on one session run one at a time, all of them.
	var mu sync.Mutex
	var seen []int
	wg = sync.WaitGroup{}
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.Execute(context.Background(), api.Request{SessionID: "one",
				Code: "import time\nk = globals().get('k', 0) + 1\ntime.sleep(0.05)\nk"})
			require.NoError(t, err)
			var v int
			fmt.Sscan(r.Result, &v)
			mu.Lock()
			seen = append(seen, v)
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.ElementsMatch(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, seen)

	for _, s := range e.Sessions() {
		require.NoError(t, e.CloseSession(context.Background(), s.ID))
	}
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+2 }, 10*time.Second, 100*time.Millisecond,
		"goroutines: before %d, now %d", before, runtime.NumGoroutine())
}

func TestLocalOverload(t *testing.T) {
	e := newEnv(t, func(o *executor.Options) { o.MaxSessions = 2; o.QueueSize = 1 })
	e.run(t, "a", "1")
	e.run(t, "b", "1")
	_, err := e.Execute(context.Background(), api.Request{SessionID: "c", Code: "1"})
	require.ErrorIs(t, err, api.ErrTooManySessions)
	require.Contains(t, err.Error(), "close one")

	// One running, one queued: the third is refused at once.
	go e.Execute(context.Background(), api.Request{SessionID: "a", Code: "import time; time.sleep(2)"})
	time.Sleep(300 * time.Millisecond)
	go e.Execute(context.Background(), api.Request{SessionID: "a", Code: "1"})
	time.Sleep(300 * time.Millisecond)
	_, err = e.Execute(context.Background(), api.Request{SessionID: "a", Code: "1"})
	require.ErrorIs(t, err, api.ErrQueueFull)

	// A caller that gives up while queued gets its context error and the call never runs.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = e.Execute(ctx, api.Request{SessionID: "b", Code: "1"})
	require.NoError(t, err)
	_ = ctx

	require.NoError(t, e.CloseSession(context.Background(), "b"))
	e.run(t, "c", "1")
}

func TestLocalIdleCulling(t *testing.T) {
	e := newEnv(t, func(o *executor.Options) { o.IdleTimeout = 2 * time.Second })
	e.run(t, "idle", "x = 1")
	require.Eventually(t, func() bool { return len(e.Sessions()) == 0 }, 15*time.Second, 200*time.Millisecond)
	r := e.run(t, "idle", "'x' in dir()")
	require.Equal(t, "False", r.Result)
	require.True(t, r.StateLost, "a culled session says its state is gone")
}

func TestLocalCancelBehavesAsTimeout(t *testing.T) {
	e := newEnv(t, nil)
	e.run(t, "c", "x = 5")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	r, err := e.Execute(ctx, api.Request{SessionID: "c", Code: "import time\ntime.sleep(60)"})
	require.NoError(t, err)
	require.Equal(t, api.StatusTimeout, r.Status)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, "5", e.run(t, "c", "x").Result)
}

func TestLocalCloseWithCallsInFlight(t *testing.T) {
	e := newEnv(t, nil)
	e.run(t, "z", "1")
	errc := make(chan error, 1)
	go func() {
		_, err := e.Execute(context.Background(), api.Request{SessionID: "z", Code: "import time\ntime.sleep(60)"})
		errc <- err
	}()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	require.NoError(t, e.Close())
	require.Less(t, time.Since(start), 15*time.Second)
	require.ErrorIs(t, <-errc, api.ErrSessionClosed)
	_, err := e.Execute(context.Background(), api.Request{SessionID: "z", Code: "1"})
	require.ErrorIs(t, err, api.ErrClosed)
}

// TestLocalSoak runs mixed calls with random faults and checks that none hangs and
// that no kernel process is left afterwards (counted from the OS).
func TestLocalSoak(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	n := 1000
	if testenv.Short() || os.Getenv("KERNELBOX_SOAK") == "short" {
		n = 150
	}
	e := newOwnEnv(t, func(o *executor.Options) { o.InterruptGrace = time.Second; o.QueueSize = 64 })
	soak(t, e, n, nil)
	require.NoError(t, e.Close())
	require.Eventually(t, func() bool { return len(e.Backend.Procs()) == 0 }, 15*time.Second, 200*time.Millisecond,
		"kernel processes left: %d", len(e.Backend.Procs()))
}

// soak runs n mixed calls over 8 sessions, 6 at a time, a quarter of the fault cases
// injecting a fault (a timeout, a kernel death, a kernel ignoring SIGINT, or what
// extra does), and requires that none hangs or fails to run.
func soak(t *testing.T, e *env, n int, extra func(rng *rand.Rand, session string) string) map[string]int {
	t.Helper()
	codes := []struct {
		code  string
		fault string
	}{
		{"x = globals().get('x', 0) + 1\nx", ""},
		{"print('hello')", ""},
		{"1/0", ""},
		{"import time\ntime.sleep(5)", "timeout"},
		{"import os\nos._exit(3)", "death"},
		{"print('y' * 100000)", ""},
		{"import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(5)", "hang"},
		{"EXTRA", "extra"},
	}
	counts := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 6)
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			c := codes[rng.IntN(len(codes))]
			if c.fault != "" && rng.IntN(4) != 0 { // faults are a quarter as common
				c = codes[0]
			}
			session := fmt.Sprintf("soak%d", i%8)
			if c.fault == "extra" {
				if extra == nil {
					c = codes[0]
				} else {
					c.code = extra(rng, session)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			r, err := e.Execute(ctx, api.Request{SessionID: session, Code: c.code, Timeout: 2 * time.Second})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case ctx.Err() != nil:
				counts["hung"]++
				// Which call, and what it got, for the next person to read.
				t.Logf("call %d on %s (fault %q) did not end within 90 s: err %v, result %+v", i, session, c.fault, err, r)
			case err != nil:
				counts["call failed: "+err.Error()]++
			default:
				counts[string(r.Status)]++
				if c.fault != "" {
					counts["fault:"+c.fault]++
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("soak: %d calls in %s: %v", n, time.Since(start).Round(time.Second), counts)
	require.Zero(t, counts["hung"])
	for k := range counts {
		require.False(t, strings.HasPrefix(k, "call failed: "), k)
	}
	return counts
}
