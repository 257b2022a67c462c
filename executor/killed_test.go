package executor_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/procwatch"
	"github.com/kernelbox/kernelbox/internal/serverflags"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// A kernel killed in the moment after a call returned, before its server noticed
// (issue 33 item 7a: the next call was used up as kernel_died without running, 10 of
// 10 times at 0 ms, 9 of 10 at 50 ms, because the check before a call is skipped for
// a kernel used within 200 ms): the next call finds the death before it is sent,
// runs on the kernel the server restarts, and says the state is gone.
func TestLocalKernelKilledBetweenCalls(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newOwnEnv(t, nil)
	killedBetweenCalls(t, e, func(string) int { return e.Backend.ServerPID() })
}

// The same on docker, where the kernel's process is seen from the host's /proc below
// the container's first process.
func TestDockerKernelKilledBetweenCalls(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newDockerEnv(t, testexec.Real{}, nil)
	killedBetweenCalls(t, e, func(session string) int {
		out, err := exec.Command("docker", "inspect", "-f", "{{.State.Pid}}", sessionContainer(t, session)).Output()
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		require.NoError(t, err)
		return pid
	})
}

// killedBetweenCalls kills the kernel of a session 0 ms and 50 ms after a call
// returned, ten times each; root returns a process the session's kernel runs below.
// Every next call must run, on a fresh kernel, with state_lost. Most deaths must be
// found by the process watch before the call is sent; the server's restarter (it
// polls every 3 s) may find one first, and then the call says so instead (CI saw 1
// of 20 under load): both are right, so the test asks for at least half by the watch.
func killedBetweenCalls(t *testing.T, e *env, root func(session string) int) {
	t.Helper()
	watched := 0
	for _, gap := range []time.Duration{0, 50 * time.Millisecond} {
		id := fmt.Sprintf("killed-%d", gap.Milliseconds())
		for round := range 10 {
			r := e.run(t, id, fmt.Sprintf("x = %d", round))
			require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
			killKernel(t, e, id, root(id))
			time.Sleep(gap)
			start := time.Now()
			r = e.run(t, id, "print('x' in dir())")
			took := time.Since(start)
			t.Logf("gap %s round %d: status %s, stdout %q, state_lost %v, took %s, notes %q", gap, round, r.Status, r.Stdout, r.StateLost, took.Round(time.Millisecond), r.Notes)
			require.Equal(t, api.StatusOK, r.Status, "gap %s round %d: the call after the kill must run: %+v", gap, round, r.Error)
			require.Equal(t, "False\n", r.Stdout, "gap %s round %d: it ran on a fresh kernel", gap, round)
			require.True(t, r.StateLost, "gap %s round %d", gap, round)
			notes := strings.Join(r.Notes, "\n")
			require.Contains(t, notes, "the kernel died after the previous call", "gap %s round %d", gap, round)
			if strings.Contains(notes, "before this call was sent") {
				watched++
			}
		}
	}
	t.Logf("%d of 20 deaths found by the process watch before the call was sent", watched)
	require.GreaterOrEqual(t, watched, 10, "the process watch must find most deaths before the server's restarter does")
}

// killKernel SIGKILLs the kernel process of session id and waits until the kill has
// taken effect (a zombie or gone: microseconds), so that the kernel is dead, not
// dying, when the next call comes.
func killKernel(t *testing.T, e *env, id string, root int) {
	t.Helper()
	info, err := e.Session(id)
	require.NoError(t, err)
	p, err := findKernel(root, info.KernelID)
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, syscall.Kill(p.Pid(), syscall.SIGKILL))
	require.Eventually(t, p.Exited, 5*time.Second, 100*time.Microsecond)
}

// A warm kernel killed just before a new session takes it: the session's first call
// runs (on another kernel) instead of being used up as kernel_died.
func TestLocalWarmKernelKilled(t *testing.T) {
	e := newOwnEnv(t, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "warm", Warm: 1}}
	})
	for round := range 3 {
		require.Eventually(t, func() bool { return e.WarmReadyOf("warm") == 1 }, 60*time.Second, 20*time.Millisecond)
		n := killKernels(t, e.Backend.ServerPID())
		require.GreaterOrEqual(t, n, 1, "the warm kernel (and the earlier rounds' sessions' kernels)")
		r, err := e.Execute(context.Background(), api.Request{SessionID: fmt.Sprintf("w%d", round), Template: "warm", Code: "print('ran')"})
		require.NoError(t, err)
		t.Logf("round %d: status %s, stdout %q, notes %q", round, r.Status, r.Stdout, r.Notes)
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		require.Equal(t, "ran\n", r.Stdout)
	}
}

// killKernels SIGKILLs every kernel below the local server's supervisor sup, waits
// until each kill has taken effect, and returns how many it killed.
func killKernels(t *testing.T, sup int) int {
	t.Helper()
	files, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	var procs []*procwatch.Proc
	seen := map[int]bool{}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, arg := range strings.Split(string(b), "\x00") {
			name := filepath.Base(arg)
			if !strings.HasPrefix(name, "kernel-") || !strings.HasSuffix(name, ".json") {
				continue
			}
			if p, err := findKernel(sup, strings.TrimSuffix(strings.TrimPrefix(name, "kernel-"), ".json")); err == nil && !seen[p.Pid()] {
				seen[p.Pid()] = true
				procs = append(procs, p)
			}
			break
		}
	}
	for _, p := range procs {
		require.NoError(t, syscall.Kill(p.Pid(), syscall.SIGKILL))
	}
	for _, p := range procs {
		require.Eventually(t, p.Exited, 5*time.Second, 100*time.Microsecond)
		_ = p.Close()
	}
	return len(procs)
}

// findKernel finds kernel id's process below root (the local server's supervisor,
// or a container's first process) as the backends do: the server first, then its
// child.
func findKernel(root int, id string) (*procwatch.Proc, error) {
	srv, err := procwatch.FindServer(root, serverflags.LauncherName)
	if err != nil {
		return nil, err
	}
	return procwatch.FindKernel(srv, id)
}
