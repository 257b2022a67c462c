package procwatch

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// startFake starts a process below this one whose command line names the
// connection file of kernel id, as a Jupyter kernel's does, and a child of it that
// shares that command line (as a forked child of a kernel would, before exec).
func startFake(t *testing.T, id string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `sleep 30 & wait`, "sh", "-f", "/tmp/runtime/kernel-"+id+".json")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func TestFindKernelAndExit(t *testing.T) {
	cmd := startFake(t, "abc-1")
	var p *Proc
	require.Eventually(t, func() bool {
		var err error
		p, err = FindKernel(os.Getpid(), "abc-1")
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	defer p.Close()
	require.Equal(t, cmd.Process.Pid, p.Pid(), "the topmost process with the argument")
	require.False(t, p.Exited())

	_, err := FindKernel(os.Getpid(), "abc-2")
	require.Error(t, err, "another kernel's id")
	_, err = FindKernel(os.Getpid(), "../x")
	require.Error(t, err)

	require.NoError(t, cmd.Process.Kill())
	require.Eventually(t, p.Exited, 5*time.Second, time.Millisecond, "a zombie (not reaped yet) counts as exited")
	_ = cmd.Wait()
	require.True(t, p.Exited(), "reaped")
}

func TestStatState(t *testing.T) {
	for _, tc := range []struct {
		line  string
		state byte
		ok    bool
	}{
		{"12 (python3) S 1 12", 'S', true},
		{"12 (a) b) Z 1 12", 'Z', true},
		{"12 (x", 0, false},
		{"", 0, false},
	} {
		s, ok := statState([]byte(tc.line))
		require.Equal(t, tc.ok, ok, tc.line)
		require.Equal(t, tc.state, s, tc.line)
	}
}

// BenchmarkExited is the cost of the check made before every call.
func BenchmarkExited(b *testing.B) {
	cmd := exec.Command("sleep", "30")
	require.NoError(b, cmd.Start())
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	p, err := open(cmd.Process.Pid)
	require.NoError(b, err)
	defer p.Close()
	for b.Loop() {
		if p.Exited() {
			b.Fatal("this process has not exited")
		}
	}
}
