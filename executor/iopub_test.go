package executor_test

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/serverflags"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// requireNoOutputLostWhileServerStalls runs a cell printing 30,000 flushed lines (12 MB)
// and, once its output arrives, stops the session's Jupyter server (process serverPID)
// for 3 s. A
// server that falls behind its kernel (stopped here, starved of CPU in practice) must
// not lose any output: past ZMQ's high-water mark (1000 messages by default) a PUB
// socket drops messages silently, and before kernelbox lifted it this call lost output
// and its final "idle" status, and waited out its whole timeout.
func requireNoOutputLostWhileServerStalls(t *testing.T, e *env, serverPID func() int) {
	t.Helper()
	e.run(t, "s", "import sys")
	pid := serverPID()
	require.NotZero(t, pid)
	const lines, size = 30000, 400
	printing := make(chan struct{})
	var once sync.Once
	done := make(chan *api.Result, 1)
	go func() {
		r, err := e.ExecuteStream(context.Background(), api.Request{SessionID: "s", Timeout: time.Minute,
			Code: "for _ in range(30000):\n    sys.stdout.write('x' * 399 + '\\n'); sys.stdout.flush()"},
			func(ev api.Event) {
				if ev.Type == "stream" {
					once.Do(func() { close(printing) })
				}
			})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	select {
	case <-printing: // output is flowing: stop the server in the middle of it
	case <-time.After(30 * time.Second):
		t.Fatal("no output within 30 s")
	}
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	defer syscall.Kill(pid, syscall.SIGCONT) // also when an assertion below fails
	time.Sleep(3 * time.Second)
	select {
	case <-done:
		// Nothing can finish while the server is stopped: the cell had ended
		// before the stop, so the test checked nothing.
		t.Fatal("the call ended before the server was stopped: the stall came too late to test anything")
	default:
	}
	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	r := <-done
	require.NotNil(t, r)
	require.Equal(t, api.StatusOK, r.Status, "after %d of %d bytes in %d ms: %+v", len(r.Stdout), lines*size, r.DurationMS, r.Error)
	require.False(t, r.Truncated, r.TruncationNote)
	require.Equal(t, lines*size, len(r.Stdout), "output lost between the kernel and the server")
}

func TestLocalNoOutputLostWhileServerStalls(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	if testenv.Short() {
		t.Skip("long")
	}
	e := newOwnEnv(t, func(o *executor.Options) { o.MaxStreamBytes = 16 << 20 })
	requireNoOutputLostWhileServerStalls(t, e, func() int { return e.jupyterPID(t) })
}

func TestDockerNoOutputLostWhileServerStalls(t *testing.T) {
	if testenv.Short() {
		t.Skip("long")
	}
	e := newDockerEnv(t, testexec.Real{}, func(o *executor.Options) { o.MaxStreamBytes = 16 << 20 })
	requireNoOutputLostWhileServerStalls(t, e, func() int {
		ids := dockerContainers(t)
		require.Len(t, ids, 1)
		// The server's host pid: docker top lists the container's processes.
		out, err := exec.Command("docker", "top", ids[0], "-eo", "pid,args").Output()
		require.NoError(t, err)
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 1 && strings.Contains(l, serverflags.LauncherName) && !strings.HasPrefix(f[1], "timeout") {
				pid, err := strconv.Atoi(f[0])
				require.NoError(t, err)
				return pid
			}
		}
		t.Fatalf("no server process in:\n%s", out)
		return 0
	})
}
