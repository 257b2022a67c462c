package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/jupyterproc"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/jupyter"
)

// remoteKept reads serve's remote.json: each session's kept kernel id. The file
// is 0600 and never holds the gateway's token.
func remoteKept(t *testing.T, ws, token string) map[string]string {
	t.Helper()
	path := filepath.Join(ws, "state", "remote.json")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(data), token, "the gateway token is never kept")
	var st struct {
		Kernels []struct {
			Session  string `json:"session"`
			KernelID string `json:"kernel_id"`
		} `json:"kernels"`
	}
	require.NoError(t, json.Unmarshal(data, &st), "%s", data)
	out := map[string]string{}
	for _, k := range st.Kernels {
		out[k.Session] = k.KernelID
	}
	return out
}

// TestServeRemoteAdopt is issue 34 item 1 on the remote backend, with a real
// Jupyter Server as the gateway: three sessions with state (and a file in each
// one's kernel directory), one in the middle of a call, one whose kernel was set
// up by "another version" of kernelbox; SIGKILL serve; one session's kernel shut down on the gateway
// by hand; serve started again on the workspace: the two others answer with their
// old variables and file, the third is told state_lost with the reason; then a
// graceful stop with remote's default policy (keep) and a start take all three back
// again; after they are closed no kernel is left on the gateway.
func TestServeRemoteAdopt(t *testing.T) {
	py := testenv.Jupyter(t)
	t.Parallel()
	t0 := time.Now()
	gw, err := jupyterproc.Start(context.Background(), jupyterproc.Options{Python: py, RootDir: t.TempDir(), TCPAddr: "127.0.0.1:0"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = gw.Stop(context.Background()) })
	jc, err := jupyter.NewClient(gw.Endpoint(), nil)
	require.NoError(t, err)
	ws, data := testDirs(t)
	token := gw.Endpoint().Token
	env := []string{"KERNELBOX_GATEWAY_TOKEN=" + token}
	// rawServe asks for --on-stop close; an empty one gives back remote's default.
	args := []string{"--backend", "remote", "--gateway", gw.Endpoint().URL, "--workspace", ws, "--workdir", data,
		"--token", "tk", "--on-stop=", "--log-level", "debug"}
	ids := []string{"rk1", "rk2", "rk3"}
	cmd, url, _ := rawServeEnv(t, env, args...)
	c := adoptClient(t, url)
	eachSession(ids, func(i int, id string) {
		r := adoptRun(t, c, id, fmt.Sprintf("x = %d\nopen('note.txt', 'w').write('note of %s')", 10*(i+1), id))
		assert.Empty(t, r.Error, id)
	})
	kept := remoteKept(t, ws, token)
	require.Len(t, kept, 3, "%v", kept)
	// rk2's kernel was set up by "another version" of kernelbox: its file-sync
	// module has another name, as after an upgrade. It is recognised all the
	// same, and the new module carries on in the same directory.
	cwd := adoptRun(t, c, "rk2", "import os, sys\n"+
		"for n in [n for n in sys.modules if n.startswith('_kernelbox_sync_')]: sys.modules['_kernelbox_sync_000000000000'] = sys.modules.pop(n)\n"+
		"os.getcwd()").Result
	// rk1 is in the middle of a call when serve dies: its kernel, busy, is
	// interrupted before it is recognised; the call answers lost.
	ctx := context.Background()
	d, err := c.Start(ctx, api.Request{SessionID: "rk1", Code: "import time\nx_during = 1\ntime.sleep(120)"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := c.Call(ctx, d.CallID)
		return err == nil && info.State == api.CallRunning
	}, 30*time.Second, 50*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // into its time.sleep

	kill9(t, cmd)
	require.NoError(t, jc.Shutdown(ctx, kept["rk3"]), "rk3's kernel shut down by hand while serve is down")
	cmd, url, log := rawServeEnv(t, env, args...)
	c = adoptClient(t, url)
	eachSession(ids[:2], func(i int, id string) {
		r := adoptRun(t, c, id, "print(open('note.txt').read()); x")
		assert.Equal(t, strconv.Itoa(10*(i+1)), r.Result, "%s keeps its variable: %+v %v\n%s", id, r.Error, r.Notes, log)
		assert.Equal(t, "note of "+id+"\n", r.Stdout, "%s keeps its file", id)
		assert.False(t, r.StateLost, "%s: %v", id, r.Notes)
	})
	info, err := c.Call(ctx, d.CallID)
	require.NoError(t, err)
	assert.Equal(t, api.CallLost, info.Status)
	assert.Equal(t, "1", adoptRun(t, c, "rk1", "x_during").Result, "the interrupted call ran up to its sleep")
	r := adoptRun(t, c, "rk2", "open('outputs/after.txt', 'w').write('after'); import os; os.getcwd()")
	assert.Equal(t, cwd, r.Result, "the same directory after an upgrade")
	require.Len(t, r.Artifacts, 1, "%v", r.Notes)
	assert.Equal(t, "after.txt", r.Artifacts[0].Name)
	r = adoptRun(t, c, "rk3", "'x' in dir()")
	assert.Equal(t, "False", r.Result)
	assert.True(t, r.StateLost)
	assert.Contains(t, strings.Join(r.Notes, "\n"), "no longer has kernel "+kept["rk3"], "%v", r.Notes)
	adoptRun(t, c, "rk3", "x = 30")
	again := remoteKept(t, ws, token)
	assert.Equal(t, kept["rk1"], again["rk1"], "the same kernel")
	assert.NotEqual(t, kept["rk3"], again["rk3"], "a new kernel")

	// A graceful stop with remote's default policy keeps the kernels.
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())
	ks, err := jc.Kernels(ctx)
	require.NoError(t, err)
	assert.Len(t, ks, 3, "kept on SIGTERM")
	cmd, url, log = rawServeEnv(t, env, args...)
	c = adoptClient(t, url)
	eachSession(ids, func(i int, id string) {
		r := adoptRun(t, c, id, "x")
		assert.Equal(t, strconv.Itoa(10*(i+1)), r.Result, "%s after a graceful stop: %+v %v\n%s", id, r.Error, r.Notes, log)
		assert.False(t, r.StateLost, "%s: %v", id, r.Notes)
	})
	r = adoptRun(t, c, "rk1", "open('note.txt').read()")
	assert.Equal(t, "'note of rk1'", r.Result)

	// Closed: nothing is left on the gateway, nor in the state file.
	eachSession(ids, func(_ int, id string) { assert.NoError(t, c.CloseSession(ctx, id)) })
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())
	ks, err = jc.Kernels(ctx)
	require.NoError(t, err)
	assert.Empty(t, ks, "no kernel left on the gateway")
	assert.Empty(t, remoteKept(t, ws, token))
	pid := gw.Pid()
	require.NoError(t, gw.Stop(ctx))
	assert.True(t, errors.Is(syscall.Kill(pid, 0), syscall.ESRCH), "no jupyter process left")
	t.Logf("took %s", time.Since(t0).Round(time.Millisecond))
}
