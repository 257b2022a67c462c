package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// running returns the live pids whose command line contains s.
func running(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), s) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !strings.Contains(string(st), ") Z ") {
			out = append(out, pid)
		}
	}
	return out
}

func eventually(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// Every process the old kernel started, setsid daemons included, is gone once its
// session was reset or closed, while kernelbox (and the server) keep running.
func TestKernelTreeDiesWithKernel(t *testing.T) {
	for _, end := range []string{"reset", "close"} {
		t.Run(end, func(t *testing.T) {
			e := testexec.On(t, testexec.LocalBackend(t), nil) // a server of its own: the test reads its process tree
			ctx := context.Background()
			mark := fmt.Sprintf("kbx-%s-%d", end, os.Getpid())
			t.Cleanup(func() {
				for _, pid := range running(mark) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			code := fmt.Sprintf("import subprocess\nsubprocess.Popen(['setsid', 'sh', '-c', 'while :; do sleep 1; done # %s'])\nsubprocess.Popen(['sh', '-c', 'sleep 600 # %s'])", mark, mark)
			r, err := e.Exec.Execute(ctx, api.Request{SessionID: "s", Code: code})
			require.NoError(t, err)
			require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
			require.True(t, eventually(5*time.Second, func() bool { return len(running(mark)) == 2 }), "started: %v", running(mark))
			if end == "reset" {
				require.NoError(t, e.Exec.ResetSession(ctx, "s"))
			} else {
				require.NoError(t, e.Exec.CloseSession(ctx, "s"))
			}
			require.True(t, eventually(5*time.Second, func() bool { return len(running(mark)) == 0 }),
				"still running 5 s after the session's %s: %v", end, running(mark))
		})
	}
}
