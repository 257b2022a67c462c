package swarm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	kbclient "github.com/kernelbox/kernelbox/client"
)

// adoptOwner and adoptName are the restart test's own deployment: another owner
// than the suite's kernelbox, so neither reaps the other's sessions.
const (
	adoptOwner = "adopt"
	adoptName  = "kernelbox-serve-adopt"
)

// startAdoptServe runs `kernelbox serve --backend swarm` in a new container on the
// manager, as an upgrade would (or, again, starts the stopped one again), with its
// workspace (and API socket) in srv on the host, and the default stop policy
// (keep). It returns its client once it answers and how long that took.
func startAdoptServe(t *testing.T, srv string, again bool) (*kbclient.Client, time.Duration) {
	t.Helper()
	sock := filepath.Join(srv, "api.sock")
	_ = os.Remove(sock)
	t0 := time.Now()
	var (
		out string
		err error
	)
	if again {
		out, err = node(1, "start", adoptName)
	} else {
		_, _ = node(1, "rm", "-f", adoptName)
		require.NoError(t, os.WriteFile(filepath.Join(srv, "templates.json"), []byte(egressTemplates), 0o644))
		// The templates' vendor secret is read from this file at start (secrets_test.go).
		require.NoError(t, os.WriteFile(filepath.Join(srv, "vendor.key"), []byte("restart-test-key\n"), 0o600))
		t0 = time.Now()
		out, err = node(1, "run", "-d", "--name", adoptName,
			"-v", nodeSock(1)+":/var/run/docker.sock", "-v", srv+":/srv", "-e", "HOME=/tmp",
			serveImage, "serve", "--backend", "swarm", "--swarm-owner", adoptOwner,
			"--listen", "unix:/srv/api.sock", "--workspace", "/srv/ws",
			"--swarm-host", "unix:///var/run/docker.sock", "--memory", "512m", "--log-level", "debug",
			"--templates", "/srv/templates.json")
	}
	require.NoError(t, err, out)
	kb, err := kbclient.New("unix:"+sock, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := kb.Health(ctx)
		return err == nil
	}, 90*time.Second, 100*time.Millisecond, "the restart test's kernelbox answers")
	return kb, time.Since(t0)
}

// adoptRun runs code in session id on kb.
func adoptRun(t *testing.T, kb *kbclient.Client, id, code string) *api.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := kb.Execute(ctx, api.Request{SessionID: id, Code: code})
	require.NoError(t, err, "session %s", id)
	return res
}

// proxyAnswer sends the session's egress proxy (its HTTPS_PROXY) a CONNECT
// that the egress template refuses and returns the first line of the answer:
// whether the session's listener is served. template is given to a new session.
func proxyAnswer(t *testing.T, kb *kbclient.Client, id, template string) *api.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := kb.Execute(ctx, api.Request{SessionID: id, Template: template, Code: `import os, socket, urllib.parse
p = urllib.parse.urlsplit(os.environ['HTTPS_PROXY'])
try:
    s = socket.create_connection((p.hostname, p.port), timeout=5)
    s.sendall(b'CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n')
    print(s.recv(100).decode().splitlines()[0], end='')
except OSError as e:
    print(type(e).__name__, e, end='')`})
	require.NoError(t, err, "session %s", id)
	return res
}

// each runs f for every id at once.
func each(ids []string, f func(i int, id string)) {
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { f(i, id) })
	}
	wg.Wait()
}

// ownerObjects counts the restart test's services, networks, secrets and configs
// on the swarm, by kind.
func ownerObjects(t *testing.T) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, kind := range []string{"service", "network", "secret", "config"} {
		out, err := node(1, kind, "ls", "-q", "--filter", "label=io.kernelbox.swarm-owner="+adoptOwner)
		require.NoError(t, err, out)
		n[kind] = len(strings.Fields(out))
	}
	return n
}

// serviceOf returns the id of session id's service of the restart test's owner.
func serviceOf(t *testing.T, id string) string {
	t.Helper()
	out, err := node(1, "service", "ls", "-q", "--filter", "label=io.kernelbox.swarm-owner="+adoptOwner,
		"--filter", "label=io.kernelbox.session="+id)
	require.NoError(t, err, out)
	ids := strings.Fields(out)
	require.Len(t, ids, 1, "one service for session %s", id)
	return ids[0]
}

// TestRestartAdopts is issue 34 item 1 on the swarm lab: sessions with state,
// one of them in the middle of a call; SIGKILL `kernelbox serve`; one session's
// service removed by hand meanwhile; a new serve container on the same workspace
// and owner: the idle sessions answer x with their old values and read their
// files, the interrupted call answers GET /v1/calls/ID as lost with the reason,
// the session whose service was removed is told state_lost with the reason, new
// calls run. A graceful stop (default policy keep) and a start take them back
// again. Nothing is left or duplicated once they are closed.
func TestRestartAdopts(t *testing.T) {
	requireLab(t)
	srv := filepath.Join(lab.dir, "adopt")
	require.NoError(t, os.MkdirAll(srv, 0o755))
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := node(1, "logs", "--tail", "60", adoptName)
			t.Logf("last serve's logs:\n%s", logs)
		}
		_, _ = node(1, "rm", "-f", adoptName)
	})
	ctx := context.Background()
	ids := []string{"adopt-0", "adopt-1", "adopt-2", "adopt-gone"}

	kb, took := startAdoptServe(t, srv, false)
	t.Logf("first serve answering in %s", took.Round(time.Millisecond))
	t0 := time.Now()
	each(ids, func(i int, id string) {
		r := adoptRun(t, kb, id, fmt.Sprintf("x = %d\nopen('outputs/f.txt', 'w').write('file %d')", 7*i, i))
		assert.Equal(t, api.StatusOK, r.Status, "%s: %+v", id, r.Error)
	})
	// A session with a network allowlist: its proxy listens on kernelbox's
	// address on its network, which its kernel's environment names.
	net := "adopt-net"
	r := proxyAnswer(t, kb, net, "egress")
	assert.Equal(t, "HTTP/1.1 403 Forbidden", r.Stdout, "%+v", r.Error)
	require.False(t, t.Failed())
	t.Logf("%d sessions started in %s", len(ids)+1, time.Since(t0).Round(time.Millisecond))
	d, err := kb.Start(ctx, api.Request{SessionID: ids[0], Code: "import time\nx_during = 1\ntime.sleep(120)"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := kb.Call(ctx, d.CallID)
		return err == nil && info.State == api.CallRunning
	}, 30*time.Second, 50*time.Millisecond, "the long call runs")
	time.Sleep(300 * time.Millisecond) // into its time.sleep
	before := ownerObjects(t)
	t.Logf("the deployment's objects: %v", before)
	gone := serviceOf(t, "adopt-gone")

	out, err := node(1, "kill", "--signal", "KILL", adoptName)
	require.NoError(t, err, out)
	out, err = node(1, "service", "rm", gone)
	require.NoError(t, err, out)

	kb, took = startAdoptServe(t, srv, false)
	t0 = time.Now()
	each(ids[:3], func(i int, id string) {
		r := adoptRun(t, kb, id, "x")
		assert.Equal(t, strconv.Itoa(7*i), r.Result, "%s keeps its variable: %+v %v", id, r.Error, r.Notes)
		assert.False(t, r.StateLost, "%s: %v", id, r.Notes)
	})
	t.Logf("after the SIGKILL: serve answering in %s, then the 3 adopted sessions answering x in %s",
		took.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	checkAdopted(t, kb, ids, d.CallID)
	assert.Equal(t, before, ownerObjects(t), "the same services, networks, secrets and configs as before the restart")
	// A new container: attached at the kept proxy address, its listener again.
	r = proxyAnswer(t, kb, net, "")
	assert.Equal(t, "HTTP/1.1 403 Forbidden", r.Stdout, "the proxy of an adopted session after a SIGKILL: %+v %v", r.Error, r.Notes)
	assert.False(t, r.StateLost, "%v", r.Notes)

	// A graceful stop keeps them (swarm's default policy) and leaves their
	// networks; the same container started again joins them and takes them back.
	t0 = time.Now()
	out, err = node(1, "stop", "-t", "60", adoptName)
	require.NoError(t, err, out)
	t.Logf("graceful stop in %s", time.Since(t0).Round(time.Millisecond))
	assert.Equal(t, before, ownerObjects(t), "kept on SIGTERM")
	kb, took = startAdoptServe(t, srv, true)
	t0 = time.Now()
	each(ids[:3], func(i int, id string) {
		r := adoptRun(t, kb, id, "y")
		assert.Equal(t, strconv.Itoa(7*i+1), r.Result, "%s after a graceful stop: %v", id, r.Notes)
	})
	r = proxyAnswer(t, kb, net, "")
	assert.Equal(t, "HTTP/1.1 403 Forbidden", r.Stdout, "the proxy of an adopted session after a graceful stop: %+v %v", r.Error, r.Notes)
	assert.False(t, r.StateLost, "%v", r.Notes)
	t.Logf("after a graceful stop: serve answering in %s, the sessions in %s", took.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))

	t0 = time.Now()
	each(append(ids, net), func(_ int, id string) {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		assert.NoError(t, kb.CloseSession(cctx, id))
	})
	out, err = node(1, "stop", "-t", "60", adoptName)
	require.NoError(t, err, out)
	t.Logf("sessions closed and serve stopped in %s", time.Since(t0).Round(time.Millisecond))
	assert.Equal(t, map[string]int{"service": 0, "network": 0, "secret": 0, "config": 0}, ownerObjects(t), "nothing left")
}

// checkAdopted checks TestRestartAdopts's sessions after the SIGKILL: the call
// cut short answers as lost with the reason, the session whose service was
// removed (the last of ids) is told state_lost with the reason, the others read
// their files and run new calls, and each session has one service.
func checkAdopted(t *testing.T, kb *kbclient.Client, ids []string, callID string) {
	t.Helper()
	info, err := kb.Call(context.Background(), callID)
	require.NoError(t, err, "a call cut short by the SIGKILL is never not found")
	assert.Equal(t, api.CallDone, info.State)
	assert.Equal(t, api.CallLost, info.Status)
	if assert.NotNil(t, info.Error) {
		assert.Equal(t, api.CodeCallLost, info.Error.Code)
		assert.Contains(t, info.Error.Message, "killed or crashed")
	}
	gone := ids[len(ids)-1]
	r := adoptRun(t, kb, gone, "'x' in dir()")
	assert.Equal(t, "False", r.Result)
	assert.True(t, r.StateLost)
	assert.Contains(t, strings.Join(r.Notes, "\n"), "was removed while kernelbox was not running", "%v", r.Notes)
	each(ids[:len(ids)-1], func(i int, id string) {
		r := adoptRun(t, kb, id, "print(open('outputs/f.txt').read(), end=''); y = x + 1; y")
		assert.Equal(t, fmt.Sprintf("file %d", i), r.Stdout, "%s keeps its files", id)
		assert.Equal(t, strconv.Itoa(7*i+1), r.Result, "%s runs new calls", id)
	})
	assert.Equal(t, "1", adoptRun(t, kb, ids[0], "x_during").Result, "the interrupted call ran up to its sleep")
	for _, id := range ids {
		serviceOf(t, id) // one each: none duplicated, the removed one started afresh
	}
}
