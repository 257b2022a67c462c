package main

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// TestServeDockerWarmTakenAdopt: a session that took a warm container, SIGKILLed
// right after its first call answered (before the container's rename, which waits
// for the calls to end), is taken back by the next serve with its variable, and
// its container is then named after it: the state file listed it under its
// session as the call ran (docker's AdoptNow), not only after the rename.
func TestServeDockerWarmTakenAdopt(t *testing.T) {
	testenv.Docker(t)
	t.Parallel()
	ws, data := testDirs(t)
	args := append(adoptArgs(ws, data), "--warm", "1")
	cmd, url, _ := rawServe(t, args...)
	owner := ownerLabel(t, cmd.Process.Pid)
	warm := func() []string {
		out, err := exec.Command("docker", "ps", "-q", "--filter", "label=io.kernelbox.owner="+owner,
			"--filter", "name=^kernelbox-warm\\.").Output()
		require.NoError(t, err)
		return strings.Fields(string(out))
	}
	c := adoptClient(t, url)
	// A call running on another session holds the rename back (it waits up to 2 s
	// for no call to run), so that the kill below lands before it.
	r := adoptRun(t, c, "busy", "1")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Eventually(t, func() bool { return len(warm()) == 1 }, 3*time.Minute, 100*time.Millisecond, "a warm container")
	time.Sleep(3 * time.Second) // its kernel is ready a little after the container
	ctx := context.Background()
	_, err := c.Start(ctx, api.Request{SessionID: "busy", Code: "import time; time.sleep(60)"})
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)
	r = adoptRun(t, c, "wt1", "x = 41")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Empty(t, containersNamed(t, "wt1"), "a warm container taken, not yet renamed (else this test shows nothing)")
	kill9(t, cmd)

	cmd, url, log := rawServe(t, adoptArgs(ws, data)...)
	c = adoptClient(t, url)
	r = adoptRun(t, c, "wt1", "x + 1")
	assert.Equal(t, "42", r.Result, "the warm-taken session is taken back: %+v %v\n%s", r.Error, r.Notes, log)
	assert.False(t, r.StateLost, "%v", r.Notes)
	assert.Len(t, containersNamed(t, "wt1"), 1, "renamed after its session once taken back")
	require.NoError(t, c.CloseSession(ctx, "wt1"))
	require.NoError(t, c.CloseSession(ctx, "busy"))
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())
}
