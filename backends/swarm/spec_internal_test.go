package swarm

import (
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/internal/sandbox/sandboxtest"
	"github.com/kernelbox/kernelbox/executor"
)

func testBackend(t *testing.T, o Options) *Backend {
	t.Helper()
	o.Self = "self"
	cfg, err := o.resolve()
	require.NoError(t, err)
	return &Backend{cfg: cfg, instance: "00000000-1111-2222-3333-444444444444"}
}

// The service spec carries every hardening field the engine honours, and no
// secret: the token is a secret reference, never in the command or environment.
func TestServiceSpecHardening(t *testing.T) {
	t.Parallel()
	b := testBackend(t, Options{Constraints: []string{"node.labels.kernels==yes"}})
	spec := b.serviceSpec(sessionObjects{name: "kernelbox-abcd", session: "s1", network: "net1", secret: "sec1"}, b.cfg)
	cs := spec.TaskTemplate.ContainerSpec
	assert.Equal(t, []string{"ALL"}, cs.CapabilityDrop)
	assert.True(t, cs.ReadOnly)
	require.NotNil(t, cs.Init)
	assert.True(t, *cs.Init)
	assert.Equal(t, "1000:1000", cs.User)
	assert.Equal(t, swarm.ResolutionModeDNSRR, spec.EndpointSpec.Mode)
	assert.Equal(t, swarm.RestartPolicyConditionNone, spec.TaskTemplate.RestartPolicy.Condition)
	assert.Equal(t, []swarm.NetworkAttachmentConfig{{Target: "net1"}}, spec.TaskTemplate.Networks)
	assert.Equal(t, []string{"node.labels.kernels==yes"}, spec.TaskTemplate.Placement.Constraints)
	lim := spec.TaskTemplate.Resources.Limits
	assert.Equal(t, int64(DefaultMemory), lim.MemoryBytes)
	assert.Equal(t, int64(DefaultPidsLimit), lim.Pids)
	assert.Equal(t, int64(DefaultCPUs*1e9), lim.NanoCPUs)
	assert.Positive(t, spec.TaskTemplate.Resources.Reservations.MemoryBytes)
	require.Len(t, cs.Secrets, 1)
	assert.Equal(t, "sec1", cs.Secrets[0].SecretID)
	assert.Equal(t, uint32(0o400), uint32(cs.Secrets[0].File.Mode))
	for _, s := range append(append([]string(nil), cs.Command...), cs.Env...) {
		assert.NotContains(t, strings.ToLower(s), "token=", "no token in the command or environment: %q", s)
	}
	assert.Equal(t, "sh", cs.Command[0])
	assert.Contains(t, cs.Command[2], "NoNewPrivs", "the task refuses to run without NoNewPrivs")
	assert.Contains(t, strings.Join(cs.Command, " "), "timeout -k 10 86400", "the max lifetime is enforced in the task")
	var resolv bool
	for _, c := range cs.Configs {
		if c.File.Name == resolvConf {
			resolv = true
		}
	}
	assert.True(t, resolv, "resolv.conf is replaced by one without a resolver")
}

// A template's fields reach the service; the backend's own are kept elsewhere.
func TestServiceSpecTemplate(t *testing.T) {
	t.Parallel()
	b := testBackend(t, Options{})
	c := b.cfg.withTemplate(executor.Template{
		Image: "kernelbox/kernel-r:latest", Memory: 256 << 20, CPUs: 0.5, Pids: 64,
		MaxLifetime: time.Hour, Env: map[string]string{"B": "2", "A": "1"},
	})
	spec := b.serviceSpec(sessionObjects{name: "kernelbox-abcd", session: "s1"}, c)
	cs := spec.TaskTemplate.ContainerSpec
	assert.Equal(t, "kernelbox/kernel-r:latest", cs.Image)
	lim := spec.TaskTemplate.Resources.Limits
	assert.Equal(t, int64(256<<20), lim.MemoryBytes)
	assert.Equal(t, int64(5e8), lim.NanoCPUs)
	assert.Equal(t, int64(64), lim.Pids)
	assert.Contains(t, strings.Join(cs.Command, " "), "timeout -k 10 3600")
	assert.Equal(t, []string{"A=1", "B=2"}, cs.Env[len(cs.Env)-2:])
	// The backend's own settings are unchanged for the next session.
	assert.Equal(t, DefaultImage, b.cfg.Image)
	assert.Empty(t, b.cfg.Env)
}

func TestOptionsRefused(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{Self: "s", User: "0:0"},
		{Self: "s", User: "kernel"},
		{Self: "s", Owner: "bad owner"},
	} {
		_, err := o.resolve()
		assert.Error(t, err, "%+v", o)
	}
}

// lossReason names the node and says what happened to it or to the task.
func TestLossReason(t *testing.T) {
	t.Parallel()
	p := &Placement{task: "t1", nodeID: "n1", node: "node vm (n1)"}
	ready := swarm.Node{Status: swarm.NodeStatus{State: swarm.NodeStateReady}, Spec: swarm.NodeSpec{Availability: swarm.NodeAvailabilityActive}}
	running := swarm.Task{Status: swarm.TaskStatus{State: swarm.TaskStateRunning}}
	for _, tc := range []struct {
		name  string
		nodes map[string]swarm.Node
		tasks map[string]swarm.Task
		want  string
	}{
		{"alive", map[string]swarm.Node{"n1": ready}, map[string]swarm.Task{"t1": running}, ""},
		{"left", map[string]swarm.Node{}, map[string]swarm.Task{"t1": running}, "node vm (n1) left the swarm"},
		{"down", map[string]swarm.Node{"n1": {Status: swarm.NodeStatus{State: swarm.NodeStateDown, Message: "heartbeat failure"}}},
			map[string]swarm.Task{"t1": running}, "node vm (n1) is down (heartbeat failure)"},
		{"drained", map[string]swarm.Node{"n1": {Status: swarm.NodeStatus{State: swarm.NodeStateReady}, Spec: swarm.NodeSpec{Availability: swarm.NodeAvailabilityDrain}}},
			map[string]swarm.Task{"t1": running}, "node vm (n1) was drained"},
		{"task gone", map[string]swarm.Node{"n1": ready}, map[string]swarm.Task{}, "task on node vm (n1) is gone"},
		{"task failed", map[string]swarm.Node{"n1": ready}, map[string]swarm.Task{"t1": {Status: swarm.TaskStatus{
			State: swarm.TaskStateFailed, Err: "OOM", ContainerStatus: &swarm.ContainerStatus{ExitCode: 137}}}},
			"task on node vm (n1) is failed (OOM, exit code 137)"},
	} {
		got := lossReason(p, tc.tasks, tc.nodes)
		if tc.want == "" {
			assert.Empty(t, got, tc.name)
		} else {
			assert.Contains(t, got, tc.want, tc.name)
		}
	}
}

// The service's task carries its config's sandbox.Spec hardening unchanged, with
// the session's /workspace tmpfs besides, as the docker backend's container does
// (sandbox's TestContainerAndTaskHarden holds the two translations to the same
// hardening).
func TestServiceSpecKeepsSandbox(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{{}, {Memory: -1, PidsLimit: -1, TmpSize: -1, CPUs: -1, WorkspaceSize: 5 << 20, User: "1500:1500"}} {
		b := testBackend(t, o)
		c := b.cfg.withTemplate(executor.Template{Env: map[string]string{"A": "1"}})
		spec := b.serviceSpec(sessionObjects{name: "kernelbox-abcd", session: "s1", network: "net1", secret: "sec1"}, c)
		want := sandboxtest.OfTask(c.Task(server, b.labels("s1")))
		want.Tmpfs["/workspace"] = sandboxtest.Tmpfs{Size: c.workSize, Mode: 0o1777}
		assert.Equal(t, want, sandboxtest.OfTask(spec.TaskTemplate))
		assert.Equal(t, b.labels("s1"), spec.Annotations.Labels)
	}
}
