package swarm_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
)

// lossBound is how long a call may take to end as kernel_died once its node is
// gone: the manager marks a node down when it has missed its heartbeats (the
// lab's swarm keeps Engine 20.10's default dispatcher heartbeat of 5 s, and a
// node is down after about three periods), the backend's watch asks the manager
// every second, and the executor then fails the call at once.
const lossBound = 45 * time.Second

// placeOn opens sessions named prefix-0, prefix-1, ... (x = 41 in each), six at
// once, until want of them run on one worker node (never n1: kernelbox itself
// runs there), at most max sessions, and returns that node's lab name, the
// sessions on it and every session opened.
func placeOn(t *testing.T, prefix string, want, max int) (string, []string, []string) {
	t.Helper()
	on := map[string][]string{}
	var all []string
	for len(all) < max {
		batch := make([]string, 0, 6)
		for i := len(all); i < min(len(all)+6, max); i++ {
			batch = append(batch, fmt.Sprintf("%s-%d", prefix, i))
		}
		var wg sync.WaitGroup
		for _, id := range batch {
			wg.Go(func() {
				res := run(t, id, "x = 41")
				assert.Equal(t, api.StatusOK, res.Status, "%+v", res.Error)
			})
		}
		wg.Wait()
		all = append(all, batch...)
		require.False(t, t.Failed())
		for _, id := range batch {
			n := labNode(t, sessionTask(t, id).NodeID)
			on[n] = append(on[n], id)
		}
		for _, w := range []string{"n2", "n3"} {
			if len(on[w]) >= want {
				return w, on[w], all
			}
		}
	}
	t.Fatalf("the swarm placed no %d of %d sessions on one worker: %v", want, max, on)
	return "", nil, nil
}

// nodeIndex maps a lab node name ("n3") to its index (3).
func nodeIndex(t *testing.T, name string) int {
	t.Helper()
	i, err := strconv.Atoi(strings.TrimPrefix(name, "n"))
	require.NoError(t, err)
	return i
}

// nodeID returns a lab node's swarm id.
func nodeID(t *testing.T, i int) string {
	t.Helper()
	id, err := node(i, "info", "--format", "{{.Swarm.NodeID}}")
	require.NoError(t, err, id)
	return id
}

// killNode SIGKILLs node i's dockerd, as a machine that died would stop
// answering: its managed containerd goes with it; the kernels' containers are
// left to the task's shim, which the node's restart cleans up.
func killNode(t *testing.T, i int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(lab.dir, fmt.Sprintf("n%d", i), "dockerd.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
}

// restartNode starts node i's dockerd again, as up.sh did, and waits until the
// manager sees the node ready again.
func restartNode(t *testing.T, i int, id string) {
	t.Helper()
	ns := fmt.Sprintf("kbn%d-%s", i, labID(t))
	logf, err := os.OpenFile(filepath.Join(lab.dir, fmt.Sprintf("n%d", i), "dockerd.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer logf.Close()
	// The old daemon's pid file would stop the new one from starting.
	_ = os.Remove(filepath.Join(lab.dir, fmt.Sprintf("n%d", i), "dockerd.pid"))
	cmd := exec.Command("setsid", filepath.Join(repoRoot(), "scripts", "swarmlab", "startd.sh"), lab.dir, strconv.Itoa(i), ns)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait() }()
	require.Eventually(t, func() bool {
		n, err := lab.manager.NodeInspect(context.Background(), id, client.NodeInspectOptions{})
		return err == nil && n.Node.Status.State == swarm.NodeStateReady
	}, 2*time.Minute, 500*time.Millisecond, "node n%d is ready again", i)
}

func labID(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(lab.dir, "id"))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// startCall starts code in session id and returns a channel with its result.
func startCall(t *testing.T, id, code string) <-chan *api.Result {
	t.Helper()
	ch := make(chan *api.Result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		res, err := lab.kb.Execute(ctx, api.Request{SessionID: id, Code: code})
		if err != nil {
			res = &api.Result{Status: "client error", Error: &api.ErrorInfo{Evalue: err.Error()}}
		}
		ch <- res
	}()
	return ch
}

// awaitBusy waits until session id runs a call.
func awaitBusy(t *testing.T, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		ss, err := lab.kb.Sessions(context.Background())
		if err != nil {
			return false
		}
		for _, s := range ss {
			if s.ID == id && s.State == api.StateBusy {
				return true
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond, "session %s runs its call", id)
}

// checkMoved runs the next call of each session that was on a lost node: it
// succeeds on another node, with state_lost and the reason in its notes.
func checkMoved(t *testing.T, lostNode string, ids []string) {
	t.Helper()
	for _, id := range ids {
		res := run(t, id, "x = 1\n'fresh'")
		require.Equal(t, api.StatusOK, res.Status, "session %s: %+v", id, res.Error)
		assert.True(t, res.StateLost, "session %s reports state_lost", id)
		assert.Equal(t, "'fresh'", res.Result)
		now := labNode(t, sessionTask(t, id).NodeID)
		assert.NotEqual(t, lostNode, now, "session %s runs on another node", id)
		t.Logf("session %s: next call on %s, state_lost, notes %q", id, now, res.Notes)
	}
}

// TestNodeLoss kills a worker node's daemon while one of its sessions runs a
// call: the call ends as kernel_died naming the node within lossBound, and the
// next call of each of that node's sessions gets a fresh kernel on another node,
// with state_lost. The node then comes back and joins again.
func TestNodeLoss(t *testing.T) {
	requireLab(t)
	victim, on, all := placeOn(t, "loss", 2, 9)
	defer func() {
		for _, id := range all {
			closeSession(t, id)
		}
	}()
	i := nodeIndex(t, victim)
	id := nodeID(t, i)
	call := startCall(t, on[0], "import time\nfor _ in range(600): time.sleep(0.5)")
	awaitBusy(t, on[0])

	t0 := time.Now()
	killNode(t, i)
	defer restartNode(t, i, id)
	var res *api.Result
	select {
	case res = <-call:
	case <-time.After(lossBound):
		t.Fatalf("the call on %s still runs %s after its node's daemon was killed", on[0], lossBound)
	}
	took := time.Since(t0)
	require.Equal(t, api.StatusKernelDied, res.Status, "%+v", res.Error)
	require.NotNil(t, res.Error)
	why := res.Error.Evalue
	assert.Contains(t, why, short(id), "the error names the node")
	assert.Contains(t, why, "down", "the error says the node is down")
	t.Logf("call on %s (node %s) ended %s after the kill: %s: %s", on[0], victim, took.Round(time.Millisecond), res.Status, why)

	checkMoved(t, victim, on)
}

// TestNodeDrain drains a worker node while one of its sessions runs a call: the
// call ends as kernel_died saying the node was drained, and each of the node's
// sessions continues on another node with state_lost.
func TestNodeDrain(t *testing.T) {
	requireLab(t)
	victim, on, all := placeOn(t, "drain", 2, 9)
	defer func() {
		for _, id := range all {
			closeSession(t, id)
		}
	}()
	id := nodeID(t, nodeIndex(t, victim))
	call := startCall(t, on[0], "import time\nfor _ in range(600): time.sleep(0.5)")
	awaitBusy(t, on[0])

	t0 := time.Now()
	out, err := node(1, "node", "update", "--availability", "drain", id)
	require.NoError(t, err, out)
	defer func() {
		out, err := node(1, "node", "update", "--availability", "active", id)
		assert.NoError(t, err, out)
	}()
	var res *api.Result
	select {
	case res = <-call:
	case <-time.After(lossBound):
		t.Fatalf("the call on %s still runs %s after its node was drained", on[0], lossBound)
	}
	require.Equal(t, api.StatusKernelDied, res.Status, "%+v", res.Error)
	assert.Contains(t, res.Error.Evalue, "drained")
	assert.Contains(t, res.Error.Evalue, short(id))
	t.Logf("call on %s (node %s) ended %s after the drain: %s", on[0], victim, time.Since(t0).Round(time.Millisecond), res.Error.Evalue)

	checkMoved(t, victim, on)
}

// TestRestartReaps SIGKILLs kernelbox while it has sessions and starts it
// again: the new instance removes every service, network, secret and config of
// the old one before it serves, and serves new sessions.
func TestRestartReaps(t *testing.T) {
	requireLab(t)
	for _, id := range []string{"reap-a", "reap-b"} {
		res := run(t, id, "x = 41")
		require.Equal(t, api.StatusOK, res.Status, "%+v", res.Error)
	}
	svcs, err := lab.manager.ServiceList(context.Background(), client.ServiceListOptions{Filters: make(client.Filters).Add("label", "io.kernelbox.session=reap-a")})
	require.NoError(t, err)
	require.Len(t, svcs.Items, 1)
	instance := svcs.Items[0].Spec.Labels["io.kernelbox.instance"]
	require.NotEmpty(t, instance)
	out, err := node(1, "kill", "--signal", "KILL", serveName)
	require.NoError(t, err, out)
	left := ownedBy(t, instance)
	require.NotEmpty(t, left, "the killed kernelbox left its sessions' objects")
	t.Logf("left by the killed kernelbox: %s", left)

	t0 := time.Now()
	require.NoError(t, startServe())
	t.Logf("kernelbox restarted and serving in %s", time.Since(t0).Round(time.Millisecond))
	assert.Empty(t, ownedBy(t, instance), "the new kernelbox reaped the old one's objects")

	res := run(t, "reap-a", "x")
	assert.Equal(t, api.StatusError, res.Status, "the old session's state is gone with its kernelbox")
	res = run(t, "reap-c", "1 + 1")
	require.Equal(t, api.StatusOK, res.Status, "%+v", res.Error)
	assert.Equal(t, "2", res.Result)
	for _, id := range []string{"reap-a", "reap-c"} {
		closeSession(t, id)
	}
}

// ownedBy lists the services, networks, secrets and configs of one kernelbox
// instance.
func ownedBy(t *testing.T, instance string) string {
	t.Helper()
	var left []string
	for _, kind := range []string{"service", "network", "secret", "config"} {
		out, err := node(1, kind, "ls", "-q", "--filter", "label=io.kernelbox.instance="+instance)
		require.NoError(t, err, out)
		if out != "" {
			left = append(left, fmt.Sprintf("%ss: %s", kind, strings.Join(strings.Fields(out), " ")))
		}
	}
	return strings.Join(left, "; ")
}

// short is a swarm id as the backend names nodes in messages.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
