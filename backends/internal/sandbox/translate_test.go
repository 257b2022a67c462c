package sandbox_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
	"github.com/kernelbox/kernelbox/backends/internal/sandbox/sandboxtest"
	"github.com/kernelbox/kernelbox/executor"
)

var testServer = sandbox.Server{
	Launcher: "/run/kernelbox/launcher.py", Args: []string{"--ServerApp.root_dir=/workspace"},
	ConfigDir: "/run/kernelbox/config", JupyterPath: "/run/kernelbox/jupyter",
}

// The docker container and the swarm task made from one spec carry the same
// hardening, field by field, and the hardening the spec asks for: the two
// backends cannot drift apart.
func TestContainerAndTaskHarden(t *testing.T) {
	t.Parallel()
	hardened := sandbox.Settings{}.Spec()
	hardened.UID, hardened.GID = 1000, 1000
	relaxed := sandbox.Settings{Memory: -1, CPUs: -1, PidsLimit: -1, TmpSize: -1, MaxLifetime: 90*time.Minute + time.Millisecond}.Spec()
	relaxed.UID, relaxed.GID = 1500, 1600
	relaxed.CapAdd = []string{"NET_RAW"}
	relaxed.NewPrivileges, relaxed.WritableRoot, relaxed.NoInit = true, true, true
	relaxed.Env = []string{"HOME=/tmp/home"}
	templated := hardened.WithTemplate(executor.Template{
		Image: "kernelbox/kernel-r:latest", Memory: 256 << 20, CPUs: 0.5, Pids: 64, MaxLifetime: time.Hour,
		Env: map[string]string{"B": "2", "A": "1"},
	})
	for _, tc := range []struct {
		name string
		spec sandbox.Spec
		want sandboxtest.Hardening // the fields the spec decides
	}{
		{"defaults", hardened, sandboxtest.Hardening{
			Image: sandbox.DefaultImage, User: "1000:1000", CapDrop: []string{"ALL"}, ReadOnly: true, Init: true, NoNewPrivs: true,
			Tmpfs:  map[string]sandboxtest.Tmpfs{"/tmp": {Size: 512 << 20, Mode: 0o1777}},
			Memory: 2 << 30, NanoCPUs: 2e9, Pids: 512,
		}},
		{"relaxed", relaxed, sandboxtest.Hardening{
			Image: sandbox.DefaultImage, User: "1500:1600", CapDrop: []string{"ALL"}, CapAdd: []string{"NET_RAW"},
			Tmpfs: map[string]sandboxtest.Tmpfs{"/tmp": {Mode: 0o1777}},
		}},
		{"template", templated, sandboxtest.Hardening{
			Image: "kernelbox/kernel-r:latest", User: "1000:1000", CapDrop: []string{"ALL"}, ReadOnly: true, Init: true, NoNewPrivs: true,
			Tmpfs:  map[string]sandboxtest.Tmpfs{"/tmp": {Size: 512 << 20, Mode: 0o1777}},
			Memory: 256 << 20, NanoCPUs: 5e8, Pids: 64,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			labels := sandbox.Labels("instance-1", "s1")
			ctr := sandboxtest.OfContainer(tc.spec.Container(testServer, labels))
			task := sandboxtest.OfTask(tc.spec.Task(testServer, labels))
			assert.Equal(t, ctr, task, "the docker container and the swarm task differ")

			got := ctr
			got.Command, got.Env, got.WorkDir, got.Labels, got.Log = nil, nil, "", nil, ""
			assert.Equal(t, tc.want, got)
			assert.Equal(t, "/workspace", ctr.WorkDir)
			assert.Equal(t, labels, ctr.Labels)
			assert.Equal(t, "json-file max-file=2 max-size=10m", ctr.Log)
			assert.Equal(t, tc.spec.Command(testServer), ctr.Command)
			assert.Equal(t, tc.spec.Environment(testServer), ctr.Env)
		})
	}
}

// The command runs the server under `timeout` at the max lifetime, rounded up to
// whole seconds; the environment keeps everything written on the /tmp tmpfs and
// ends with the spec's own entries, so that they win.
func TestCommandAndEnvironment(t *testing.T) {
	t.Parallel()
	s := sandbox.Settings{MaxLifetime: 90*time.Minute + 500*time.Millisecond, Python: "/opt/py"}.Spec()
	s.Env = []string{"HOME=/tmp/home"}
	assert.Equal(t, []string{"timeout", "-k", "10", "5401", "/opt/py", "-Xfrozen_modules=off", "/run/kernelbox/launcher.py",
		"--ServerApp.root_dir=/workspace"}, s.Command(testServer))
	env := s.Environment(testServer)
	assert.Contains(t, env, "JUPYTER_CONFIG_DIR=/run/kernelbox/config")
	assert.Contains(t, env, "JUPYTER_PATH=/run/kernelbox/jupyter")
	assert.Equal(t, "HOME=/tmp/home", env[len(env)-1])
	for _, e := range env[:len(env)-1] {
		k, v, _ := strings.Cut(e, "=")
		if strings.HasSuffix(k, "_DIR") && k != "JUPYTER_CONFIG_DIR" || k == "HOME" || k == "XDG_CACHE_HOME" {
			assert.True(t, strings.HasPrefix(v, "/tmp"), "%s is not on the /tmp tmpfs", e)
		}
	}
}

// A task refuses to run without NoNewPrivs, with the exit code the backend reads.
func TestRequireNoNewPrivs(t *testing.T) {
	t.Parallel()
	cmd := sandbox.RequireNoNewPrivs("probe", []string{"true"})
	require.Len(t, cmd, 5)
	assert.Equal(t, []string{"sh", "-c"}, cmd[:2])
	assert.Contains(t, cmd[2], "exit 97")
	assert.Equal(t, 97, sandbox.ExitNoNewPrivs)
	assert.Equal(t, []string{"probe", "true"}, cmd[3:])
	task := sandbox.Settings{}.Spec().Task(testServer, nil)
	assert.Equal(t, "kernelbox-task", task.ContainerSpec.Command[3])
}

// WithTemplate applies a template's fields and leaves the spec it was called on
// as it was.
func TestWithTemplate(t *testing.T) {
	t.Parallel()
	base := sandbox.Settings{}.Spec()
	base.Env = make([]string, 1, 4) // room to append into: the template must not
	base.Env[0] = "X=0"
	got := base.WithTemplate(executor.Template{Env: map[string]string{"B": "2", "A": "1"}})
	assert.Equal(t, []string{"X=0", "A=1", "B=2"}, got.Env)
	assert.Equal(t, []string{"X=0"}, base.Env)
	assert.Equal(t, base.Image, got.Image, "unset fields stay")
	assert.Equal(t, base, base.WithTemplate(executor.Template{}))
}

func TestSettingsDefaults(t *testing.T) {
	t.Parallel()
	s := sandbox.Settings{}.Spec()
	assert.Equal(t, sandbox.Spec{
		Image: "kernelbox/kernel:latest", Python: "python3", MaxLifetime: 24 * time.Hour,
		Memory: 2 << 30, NanoCPUs: 2e9, Pids: 512, TmpSize: 512 << 20,
	}, s)
	s = sandbox.Settings{Memory: 5, CPUs: 0.25, PidsLimit: 7, TmpSize: 9, MaxLifetime: time.Minute}.Spec()
	assert.Equal(t, []int64{5, 25e7, 7, 9}, []int64{s.Memory, s.NanoCPUs, s.Pids, s.TmpSize})
	assert.Equal(t, time.Minute, s.MaxLifetime)
}

func TestParseUser(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		user     string
		uid, gid int
		err      string
	}{
		{"1000:1000", 1000, 1000, ""},
		{"1:2", 1, 2, ""},
		{"0:0", 0, 0, "never runs as root"},
		{"0:1000", 0, 0, "never runs as root"},
		{"kernel", 0, 0, "numeric"},
		{"1000", 0, 0, "numeric"},
		{"1000:x", 0, 0, "numeric"},
		{"-1:5", 0, 0, "numeric"},
		{"", 0, 0, "numeric"},
	} {
		uid, gid, err := sandbox.ParseUser(tc.user)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, tc.user)
			continue
		}
		assert.NoError(t, err, tc.user)
		assert.Equal(t, []int{tc.uid, tc.gid}, []int{uid, gid}, tc.user)
	}
}

func TestLabels(t *testing.T) {
	t.Parallel()
	assert.Equal(t, map[string]string{sandbox.LabelCreatedBy: "kernelbox", sandbox.LabelInstance: "i"}, sandbox.Labels("i", ""))
	l := sandbox.Labels("i", "s")
	assert.Equal(t, "s", l[sandbox.LabelSession])
	ctr, _ := sandbox.Settings{}.Spec().Container(testServer, l)
	l["other"] = "x"
	assert.NotContains(t, ctr.Labels, "other", "the container keeps its own copy of the labels")
}
