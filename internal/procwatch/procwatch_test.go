package procwatch

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	require.Equal(t, cmd.Process.Pid, p.Pid(), "the child with the argument")
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

// TestFindKernelIgnoresDecoys builds the tree a sandbox holds (this process in the
// role of the container's first process or the server's supervisor, which adopts
// orphans): a server running the launcher script with its kernel as a child, then,
// younger, a decoy with the kernel's command line and a decoy server with a kernel
// of its own, both children of the top process as orphans would be. Only the real
// server and kernel are found.
func TestFindKernelIgnoresDecoys(t *testing.T) {
	dir := t.TempDir()
	launcher := filepath.Join(dir, "kb_launcher.py")
	script := "/bin/sh -c 'sleep 30 & wait' sh -f /tmp/runtime/kernel-k1.json &\nwait\n"
	require.NoError(t, os.WriteFile(launcher, []byte(script), 0o644))
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(args[0], args[1:]...)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		return cmd
	}
	server := start("/bin/sh", launcher)
	// Start times are in clock ticks (10 ms): the decoys start clearly later.
	time.Sleep(50 * time.Millisecond)
	start("/bin/sh", "-c", "sleep 30 & wait", "sh", "-f", "/tmp/runtime/kernel-k1.json")
	start("/bin/sh", launcher)

	var kernel *Proc
	require.Eventually(t, func() bool {
		pid, err := FindServer(os.Getpid(), "kb_launcher.py")
		if err != nil {
			return false
		}
		require.Equal(t, server.Process.Pid, pid, "the oldest process running the launcher")
		kernel, err = FindKernel(pid, "k1")
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	defer kernel.Close()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(kernel.Pid()) + "/stat")
	require.NoError(t, err)
	ppid := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))[1]
	require.Equal(t, strconv.Itoa(server.Process.Pid), ppid, "the kernel is the real server's child, not a decoy")

	_, err = FindServer(os.Getpid(), "other.py")
	require.Error(t, err)
	_, err = FindKernel(server.Process.Pid, "k2")
	require.Error(t, err, "another kernel's id")
}
