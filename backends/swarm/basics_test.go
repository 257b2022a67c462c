package swarm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	kbclient "github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

func run(t *testing.T, session, code string, inputs ...string) *api.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := lab.kb.Execute(ctx, api.Request{SessionID: session, Code: code, Inputs: inputs})
	require.NoError(t, err, "session %s", session)
	return res
}

// sessionTask returns the task of a session's service, found on the manager by the
// session label.
func sessionTask(t *testing.T, session string) swarm.Task {
	t.Helper()
	ctx := context.Background()
	svcs, err := lab.manager.ServiceList(ctx, client.ServiceListOptions{Filters: make(client.Filters).Add("label", "io.kernelbox.session="+session)})
	require.NoError(t, err)
	require.Len(t, svcs.Items, 1, "session %s has one service", session)
	tasks, err := lab.manager.TaskList(ctx, client.TaskListOptions{Filters: make(client.Filters).Add("service", svcs.Items[0].ID)})
	require.NoError(t, err)
	require.Len(t, tasks.Items, 1)
	return tasks.Items[0]
}

// labNode names a node by the lab's kb.node label (all lab nodes share a hostname).
func labNode(t *testing.T, id string) string {
	t.Helper()
	n, err := lab.manager.NodeInspect(context.Background(), id, client.NodeInspectOptions{})
	require.NoError(t, err)
	return n.Node.Spec.Labels["kb.node"]
}

func closeSession(t *testing.T, session string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, lab.kb.CloseSession(ctx, session))
}

// TestSessionsSpread opens many sessions at once through kernelbox in the swarm: the
// scheduler spreads them over all three nodes, each keeps its state, stages an input
// and returns an artifact, and nothing of them is left once they are closed.
func TestSessionsSpread(t *testing.T) {
	requireLab(t)
	n := 24
	if testenv.Short() {
		n = 6
	}
	if v, err := strconv.Atoi(os.Getenv("KERNELBOX_SWARM_SESSIONS")); err == nil && v > 0 {
		n = v
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("spread-%02d", i)
		require.NoError(t, os.WriteFile(filepath.Join(lab.srv, "in", ids[i]+".txt"), []byte("input of "+ids[i]), 0o644))
	}
	all, cold := burst(t, lab.kb, ids, func(id string) string { return "/srv/in/" + id + ".txt" })
	if t.Failed() {
		return
	}
	swarmBurst.all, swarmBurst.cold = all, cold
	perNode := map[string]int{}
	for _, id := range ids {
		perNode[labNode(t, sessionTask(t, id).NodeID)]++
	}
	// Trivial cells over the overlay, through the HTTP API and the executor.
	var warm []time.Duration
	for i := 0; i < 30; i++ {
		start := time.Now()
		res := run(t, ids[i%3], "x + 1")
		warm = append(warm, time.Since(start))
		require.Equal(t, "42", res.Result)
	}
	swarmBurst.trivial = warm
	t.Logf("%d sessions started at once: all first results in %s; sessions per node %v", n, all.Round(time.Millisecond), perNode)
	t.Logf("cold first result per session (all starting at once): p50 %s p99 %s; trivial cell p50 %s over the overlay",
		pct(cold, 50), pct(cold, 99), pct(warm, 50))
	for _, nd := range []string{"n1", "n2", "n3"} {
		assert.Positive(t, perNode[nd], "the swarm placed sessions on %s: %v", nd, perNode)
	}

	for _, id := range ids {
		closeSession(t, id)
	}
	require.Eventually(t, func() bool {
		for _, kind := range []string{"service", "network", "secret"} {
			if out, _ := node(1, kind, "ls", "-q", "--filter", "label=io.kernelbox.session"); out != "" {
				return false
			}
		}
		return true
	}, time.Minute, 200*time.Millisecond, "services, networks and secrets of closed sessions are removed: %s", leftovers())
}

// burstStats is what a burst of sessions measured, for the comparison with the
// docker backend (TestBesideDocker).
type burstStats struct {
	all     time.Duration   // until every session's first result
	cold    []time.Duration // each session's first result
	trivial []time.Duration // trivial cells on warm sessions
}

// swarmBurst is TestSessionsSpread's measurement.
var swarmBurst burstStats

// burst starts the sessions ids at once through kb: each stages its input (at
// the server's path input(id)), writes an artifact from it, which is downloaded
// and checked, and keeps its state into a second call. It returns the time until
// every first result and each session's first-result time.
func burst(t *testing.T, kb *kbclient.Client, ids []string, input func(id string) string) (time.Duration, []time.Duration) {
	t.Helper()
	cold := make([]time.Duration, len(ids))
	t0 := time.Now()
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			start := time.Now()
			res, err := kb.Execute(ctx, api.Request{SessionID: id, Inputs: []string{input(id)}, Code: "x = 41\ndata = open('inputs/" + id + ".txt').read()\n" +
				"open('outputs/out.txt', 'w').write(data.upper())\nlen(data)"})
			cold[i] = time.Since(start)
			if !assert.NoError(t, err, "session %s", id) || !assert.Equal(t, "ok", string(res.Status), "session %s: %+v", id, res.Error) {
				return
			}
			assert.Equal(t, strconv.Itoa(len("input of "+id)), res.Result, "session %s read its input", id)
			if assert.Len(t, res.Artifacts, 1, "session %s", id) {
				assert.Equal(t, "out.txt", res.Artifacts[0].Name)
				var buf bytes.Buffer
				if assert.NoError(t, kb.DownloadArtifact(ctx, id, "out.txt", &buf)) {
					assert.Equal(t, strings.ToUpper("input of "+id), buf.String())
				}
			}
			res, err = kb.Execute(ctx, api.Request{SessionID: id, Code: "x + 1"})
			if assert.NoError(t, err) {
				assert.Equal(t, "42", res.Result, "session %s kept its state", id)
				assert.False(t, res.StateLost)
			}
		})
	}
	wg.Wait()
	return time.Since(t0), cold
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))].Round(time.Millisecond)
}

// TestIsolation reads a kernel's isolation from inside it: only its overlay
// interface and lo, no default route, no usable resolver, no capabilities,
// NoNewPrivs, a read-only root and a non-root uid; and another session's kernel and
// the lab's node addresses cannot be reached from it. It also checks the service
// spec the manager holds.
func TestIsolation(t *testing.T) {
	requireLab(t)
	a, b := "iso-a", "iso-b"
	run(t, a, "1")
	run(t, b, "1")
	defer closeSession(t, a)
	defer closeSession(t, b)
	bTask := sessionTask(t, b)
	var bAddr netip.Addr
	for _, na := range bTask.NetworksAttachments {
		if len(na.Addresses) > 0 && !na.Network.Spec.Ingress {
			bAddr = na.Addresses[0].Addr()
		}
	}
	require.True(t, bAddr.IsValid(), "session b's task has an address")
	bService := "kernelbox-" // resolved below from the task's service
	svc, err := lab.manager.ServiceInspect(context.Background(), bTask.ServiceID, client.ServiceInspectOptions{})
	require.NoError(t, err)
	bService = svc.Service.Spec.Name

	code := `import os, socket, json
def status(k):
    for l in open('/proc/self/status'):
        if l.startswith(k + ':'):
            return l.split()[1]
def connect(addr, port):
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect((addr, port)); return 'connected'
    except OSError as e:
        return type(e).__name__ + ': ' + str(e)
    finally:
        s.close()
def resolve(name):
    try:
        return socket.getaddrinfo(name, 8888)[0][4][0]
    except OSError as e:
        return 'error: ' + str(e)
try:
    open('/kernelbox-probe', 'w'); rootfs = 'writable'
except OSError as e:
    rootfs = str(e)
routes = [l.split() for l in open('/proc/net/route').read().splitlines()[1:]]
print(json.dumps({
  'ifaces': sorted(os.listdir('/sys/class/net')),
  'default_route': any(r[1] == '00000000' for r in routes),
  'capeff': status('CapEff'), 'nnp': status('NoNewPrivs'), 'uid': os.getuid(),
  'rootfs': rootfs,
  'resolv': open('/etc/resolv.conf').read(),
  'resolve_b': resolve('` + bService + `'),
  'connect_b': connect('` + bAddr.String() + `', 8888),
  'connect_node': connect('10.99.0.11', 2377),
}))`
	res := run(t, a, code)
	require.Equal(t, "ok", string(res.Status), "%+v", res.Error)
	t.Logf("seen from inside session a's kernel: %s", res.Stdout)
	var got struct {
		Ifaces       []string `json:"ifaces"`
		DefaultRoute bool     `json:"default_route"`
		CapEff       string   `json:"capeff"`
		NNP          string   `json:"nnp"`
		UID          int      `json:"uid"`
		RootFS       string   `json:"rootfs"`
		Resolv       string   `json:"resolv"`
		ResolveB     string   `json:"resolve_b"`
		ConnectB     string   `json:"connect_b"`
		ConnectNode  string   `json:"connect_node"`
	}
	require.NoError(t, jsonUnmarshal(res.Stdout, &got))
	assert.Equal(t, []string{"eth0", "lo"}, got.Ifaces, "only the session's overlay interface and lo")
	assert.False(t, got.DefaultRoute, "no default route")
	assert.Equal(t, "0000000000000000", got.CapEff)
	assert.Equal(t, "1", got.NNP)
	assert.NotZero(t, got.UID)
	assert.Contains(t, got.RootFS, "Read-only file system")
	assert.NotContains(t, got.Resolv, "nameserver", "no resolver in resolv.conf")
	assert.True(t, strings.HasPrefix(got.ResolveB, "error"), "another session's service name does not resolve: %s", got.ResolveB)
	assert.NotEqual(t, "connected", got.ConnectB, "another session's kernel is unreachable")
	assert.Contains(t, got.ConnectB, "unreachable", "another session's kernel is unreachable")
	assert.NotEqual(t, "connected", got.ConnectNode, "the manager's node address is unreachable")

	// What the manager holds for the service.
	cs := svc.Service.Spec.TaskTemplate.ContainerSpec
	assert.Equal(t, []string{"ALL"}, cs.CapabilityDrop)
	assert.True(t, cs.ReadOnly)
	assert.True(t, cs.Init != nil && *cs.Init)
	assert.Equal(t, "1000:1000", cs.User)
	lim := svc.Service.Spec.TaskTemplate.Resources.Limits
	assert.Equal(t, int64(512<<20), lim.MemoryBytes)
	assert.Positive(t, lim.Pids)
	assert.Positive(t, lim.NanoCPUs)
	assert.Equal(t, swarm.RestartPolicyConditionNone, svc.Service.Spec.TaskTemplate.RestartPolicy.Condition)
	assert.Equal(t, swarm.ResolutionModeDNSRR, svc.Service.Spec.EndpointSpec.Mode)
	for _, e := range cs.Env {
		assert.NotContains(t, strings.ToLower(e), "token", "no token in the environment")
	}
	for _, c := range cs.Command {
		assert.NotContains(t, strings.ToLower(c), "token=", "no token on the command line")
	}
	nets := svc.Service.Spec.TaskTemplate.Networks
	require.Len(t, nets, 1)
	nw, err := lab.manager.NetworkInspect(context.Background(), nets[0].Target, client.NetworkInspectOptions{})
	require.NoError(t, err)
	assert.True(t, nw.Network.Internal, "the session's network is internal")
	assert.True(t, nw.Network.Attachable)
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(strings.TrimSpace(s)), v) }
