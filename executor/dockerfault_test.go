package executor_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// The faults of issue 25, done to real containers from outside: what the local
// backend's tests (between_test.go, frozen_test.go, closerace_test.go) do to a
// Jupyter server, done here with docker kill, pause and stop.

// sessionContainer returns the id of the running container of session id, created
// by this test process; it fails t unless there is exactly one.
func sessionContainer(t testing.TB, id string) string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "--filter", "label="+testexec.LabelSession+"="+id,
		"--format", `{{.ID}} {{.Label "`+testexec.LabelOwner+`"}}`).Output()
	require.NoError(t, err)
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		cid, owner, _ := strings.Cut(line, " ")
		if cid != "" && strings.HasPrefix(owner, strconv.Itoa(os.Getpid())+":") {
			ids = append(ids, cid)
		}
	}
	require.Len(t, ids, 1, "running containers of session %q", id)
	return ids[0]
}

// containerExists reports whether container id still exists (running or not).
func containerExists(t testing.TB, id string) bool {
	t.Helper()
	return exec.Command("docker", "inspect", "--format", "{{.Id}}", id).Run() == nil
}

// waitGone waits up to d until container id no longer runs.
func waitGone(t testing.TB, id string, d time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		out, err := exec.Command("docker", "inspect", "--format", "{{.State.Running}}", id).Output()
		return err != nil || strings.TrimSpace(string(out)) == "false"
	}, d, 100*time.Millisecond, "container %s still runs", id)
}

// dockerCmd runs the docker CLI and fails t with its output when it fails.
func dockerCmd(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	require.NoError(t, err, "docker %s: %s", strings.Join(args, " "), out)
}

// A docker kernel that dies between two calls (issue 25 item 0 on docker): OOM-killed
// by a background thread a second after its call returned, and its whole container
// killed from outside. The next call runs its code (on the restarted kernel, or a new
// container), says the state is gone and why, and never reports the earlier death as
// its own kernel_died.
func TestDockerDeathBetweenCalls(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newDockerEnv(t, testexec.Real{Memory: 256 << 20}, nil)

	t.Run("oom", func(t *testing.T) {
		r := e.run(t, "oom", `x = 1
import threading, time
def hog():
    time.sleep(1)
    hoard = []
    while True:
        hoard.append(b'x' * (16 << 20))
threading.Thread(target=hog, daemon=True).start()`)
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		before := sessionContainer(t, "oom")
		time.Sleep(4 * time.Second)
		start := time.Now()
		r = e.run(t, "oom", "'x' in dir()")
		took := time.Since(start)
		t.Logf("after an idle OOM kill: status %s, result %q, state_lost %v, notes %q, took %s", r.Status, r.Result, r.StateLost, r.Notes, took)
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		require.Equal(t, "False", r.Result)
		require.True(t, r.StateLost)
		require.Contains(t, strings.Join(r.Notes, "\n"), "OOM")
		require.Less(t, took, 15*time.Second)
		t.Logf("same container after the OOM kill: %v", before == sessionContainer(t, "oom"))

		r = e.run(t, "oom", "y = 2\ny")
		require.Equal(t, "2", r.Result)
		require.False(t, r.StateLost, "told once")
	})

	t.Run("kill", func(t *testing.T) {
		for _, gap := range []time.Duration{300 * time.Millisecond, 4 * time.Second} {
			e.run(t, "kill", "x = 1")
			last := time.Now()
			old := sessionContainer(t, "kill")
			dockerCmd(t, "kill", old)
			time.Sleep(gap)
			t.Logf("gap %s: %s from the previous call's end to the next call", gap, time.Since(last).Round(time.Millisecond))
			start := time.Now()
			r := e.run(t, "kill", "'x' in dir()")
			took := time.Since(start)
			t.Logf("gap %s after docker kill: status %s, result %q, state_lost %v, notes %q, took %s", gap, r.Status, r.Result, r.StateLost, r.Notes, took)
			require.Equal(t, api.StatusOK, r.Status, "gap %s: the call after the kill must run: %+v", gap, r.Error)
			require.Equal(t, "False", r.Result, "gap %s", gap)
			require.True(t, r.StateLost, "gap %s", gap)
			require.Contains(t, strings.Join(r.Notes, "\n"), "container exited with code 137", "gap %s: the note says why", gap)
			require.Less(t, took, 30*time.Second, "gap %s", gap)
			require.NotEqual(t, old, sessionContainer(t, "kill"), "gap %s: a new container", gap)
		}
	})
}

// docker pause of the session's container mid-call freezes its server (issue 25 item
// 1 on docker): the call ends within its timeout plus a bounded grace, as a timeout
// that says the state is gone, and the next call runs on a new container.
func TestDockerPausedContainer(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newDockerEnv(t, testexec.Real{}, nil)
	e.run(t, "victim", "x = 1")
	id := sessionContainer(t, "victim")
	t.Cleanup(func() { _ = exec.Command("docker", "unpause", id).Run() })

	type answer struct {
		r    *api.Result
		took time.Duration
	}
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		r, err := e.Execute(context.Background(), api.Request{SessionID: "victim", Code: "import time\ntime.sleep(60)", Timeout: 5 * time.Second})
		if err != nil {
			t.Errorf("execute: %v", err)
		}
		done <- answer{r, time.Since(start)}
	}()
	time.Sleep(time.Second)
	dockerCmd(t, "pause", id)
	paused := time.Now()

	// What health says of a backend one of whose containers is frozen.
	healthDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		time.Sleep(3 * time.Second)
		healthDone <- e.Health(ctx)
	}()

	var a answer
	select {
	case a = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the call did not return within 60 s of a 5 s timeout")
	}
	require.NotNil(t, a.r)
	t.Logf("call with a 5 s timeout in a paused container: %s (%s after the pause), status %s, state_lost %v: %+v", a.took.Round(100*time.Millisecond), time.Since(paused).Round(100*time.Millisecond), a.r.Status, a.r.StateLost, a.r.Error)
	herr := <-healthDone
	t.Logf("health 3 s into the pause: %v", herr)
	require.ErrorContains(t, herr, "not answering", "health reports the frozen container")
	require.Contains(t, []api.Status{api.StatusTimeout, api.StatusKernelDied}, a.r.Status)
	require.True(t, a.r.StateLost)
	require.Less(t, a.took, 5*time.Second+10*time.Second, "timeout plus the stated grace")

	nextStart := time.Now()
	r := e.run(t, "victim", "'x' in dir()")
	t.Logf("next call: status %s, result %q, state_lost %v, notes %q, took %s", r.Status, r.Result, r.StateLost, r.Notes, time.Since(nextStart).Round(100*time.Millisecond))
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "False", r.Result)
	require.Less(t, time.Since(nextStart), 40*time.Second)
	// The frozen container is removed, not left paused.
	require.Eventually(t, func() bool { return !containerExists(t, id) }, 30*time.Second, 200*time.Millisecond,
		"the paused container %s is still there %s after the pause", id, time.Since(paused).Round(time.Second))
	t.Logf("the paused container was removed %s after the pause", time.Since(paused).Round(100*time.Millisecond))
	require.NotEqual(t, id, sessionContainer(t, "victim"), "a new container")
}

// docker stop of the session's container during a printing loop (issue 25 item 2b on
// docker): the server's SIGTERM interrupts the kernel before it shuts down, which
// must read as kernel_died with the state gone, not as the user's KeyboardInterrupt
// with the state kept; the next call runs on a new container.
func TestDockerStoppedMidCall(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newDockerEnv(t, testexec.Real{}, nil)
	e.run(t, "s", "x = 1")
	id := sessionContainer(t, "s")
	done := make(chan *api.Result, 1)
	var stopped time.Time
	go func() {
		r, err := e.Execute(context.Background(), api.Request{SessionID: "s", Code: "import time\nfor i in range(300):\n    print(i, flush=True)\n    time.sleep(0.1)"})
		if err != nil {
			t.Errorf("execute: %v", err)
		}
		done <- r
	}()
	time.Sleep(1500 * time.Millisecond)
	stopped = time.Now()
	go func() { _ = exec.Command("docker", "stop", id).Run() }()
	var r *api.Result
	select {
	case r = <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("the call did not return after its container was stopped")
	}
	require.NotNil(t, r)
	t.Logf("docker stop mid-call: reported after %s: status %s, state_lost %v, error %+v", time.Since(stopped).Round(100*time.Millisecond), r.Status, r.StateLost, r.Error)
	require.Equal(t, api.StatusKernelDied, r.Status, "%+v", r.Error)
	require.True(t, r.StateLost)

	start := time.Now()
	r = e.run(t, "s", "'x' in dir()")
	t.Logf("next call, made at once: %s, state_lost %v, in %s", r.Status, r.StateLost, time.Since(start).Round(100*time.Millisecond))
	// A new container starts in 3-5 s on this machine alone; 13 s was seen with the
	// package's other docker tests beside it. The bound catches a call that waits
	// for a timeout (the old container's, the start's) instead of starting anew.
	require.Less(t, time.Since(start), 30*time.Second, "the next call waited far longer than a container start")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "False", r.Result)
	require.True(t, r.StateLost)
	require.NotEqual(t, id, sessionContainer(t, "s"), "a new container")
	waitGone(t, id, 30*time.Second)
}

// Calls racing CloseSession on docker (issue 25 item 3 on docker): every operation
// ends within seconds, and a live session afterwards runs in /workspace, with its
// outputs/ directory there.
func TestDockerCloseRace(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newDockerEnv(t, testexec.Real{}, nil)
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
			r, err := e.Execute(context.Background(), api.Request{SessionID: id, Code: "import os; x = 1; print(os.getcwd(), os.path.isdir('outputs'))", Timeout: 5 * time.Second})
			if err != nil {
				if !errors.Is(err, api.ErrSessionClosed) {
					t.Errorf("round %d: execute: %v", round, err)
				}
				return
			}
			if r.Status != api.StatusOK || r.Stdout != "/workspace True\n" {
				t.Errorf("round %d: status %s, stdout %q: %+v", round, r.Status, r.Stdout, r.Error)
			}
		})
	}
	const rounds = 5
	for i := range rounds {
		var wg sync.WaitGroup
		wg.Add(3)
		go func() { defer wg.Done(); execute(i, 0) }()
		go func() { defer wg.Done(); execute(i, time.Duration(500+rand.IntN(2500))*time.Millisecond) }()
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Millisecond)
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
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "/workspace True\n", r.Stdout)
	t.Logf("slowest operation in %d rounds: %s", rounds, slowest.Round(100*time.Millisecond))
	// Typically under 6 s; 21 s on a 2-core machine at load 8 (three other test
	// runs beside it). The bug it guards against hung an operation for minutes.
	require.Less(t, slowest, 40*time.Second)
}
