package jupyterproc_test

import (
	"bufio"
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

	"github.com/kernelbox/kernelbox/internal/jupyterproc"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withCmdline returns the pids whose command line is exactly cmdline.
func withCmdline(cmdline string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ") == cmdline {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !strings.Contains(string(st), ") Z ") {
				out = append(out, pid)
			}
		}
	}
	return out
}

// eventually polls cond for up to d.
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

// What a cell started, in the background or as its own session leader, dies with
// kernelbox even when kernelbox is killed with SIGKILL, and the next kernelbox
// removes the runtime directory the dead one left behind.
func TestTreeDiesWithKernelbox(t *testing.T) {
	testenv.Jupyter(t)
	// Unique arguments, so that only this test's sleeps are counted.
	tag := strconv.Itoa(os.Getpid())
	plain, session := "sleep 778."+tag, "sleep 777."+tag
	code := fmt.Sprintf("import subprocess\nsubprocess.Popen(%q.split())\nsubprocess.Popen(['setsid'] + %q.split())", plain, session)
	t.Cleanup(func() {
		for _, c := range []string{plain, session} {
			for _, pid := range withCmdline(c) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+code)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	dir, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	require.True(t, ok, line)
	require.True(t, eventually(5*time.Second, func() bool {
		return len(withCmdline(plain)) == 1 && len(withCmdline(session)) == 1
	}), "the cell's sleeps did not start")

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	gone := eventually(5*time.Second, func() bool {
		return len(withCmdline(plain))+len(withCmdline(session)) == 0
	})
	assert.True(t, gone, "still running 5 s after kernelbox was killed: %q %v, %q %v",
		plain, withCmdline(plain), session, withCmdline(session))
	require.DirExists(t, dir, "a SIGKILLed kernelbox cannot clean up")

	ctx := context.Background()
	s, err := jupyterproc.Start(ctx, jupyterproc.Options{Python: testenv.Jupyter(t), RootDir: t.TempDir()})
	require.NoError(t, err)
	defer s.Stop(ctx)
	assert.NoDirExists(t, dir, "the next start removes the dead kernelbox's runtime dir")
}
