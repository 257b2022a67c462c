package executor_test

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// newDockerEnv builds an executor on the docker backend, with a smaller memory limit
// when memory is set.
func newDockerEnv(t testing.TB, r testexec.Real, mod func(*executor.Options)) *env {
	t.Helper()
	return newEnvOn(t, testexec.DockerWith(t, r), mod)
}

// dockerContainers lists this test process's kernelbox containers.
func dockerContainers(t testing.TB) []string { return testenv.Containers(t, os.Getpid()) }

// The container's processes are the host's: a file a background thread in the
// container still holds open is seen as being written (TestLocalBackgroundOutputsNoted).
func TestDockerBackgroundOutputsNoted(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	backgroundOutputsNoted(t, newDockerEnv(t, testexec.Real{}, nil))
}

func TestDockerSessions(t *testing.T) {
	e := newDockerEnv(t, testexec.Real{}, nil)
	start := time.Now()
	r := e.run(t, "d1", "x = 41")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	t.Logf("docker cold start to first result: %s", time.Since(start).Round(time.Millisecond))
	require.Equal(t, "42", e.run(t, "d1", "x + 1").Result)

	// Inputs are staged and outputs collected exactly as with local.
	csv := filepath.Join(e.Data, "bench.csv")
	require.NoError(t, os.WriteFile(csv, []byte("a,b\n1,2\n3,4\n"), 0o644))
	r, err := e.Execute(context.Background(), api.Request{SessionID: "d1", Inputs: []string{csv},
		Code: "import pandas as pd\ndf = pd.read_csv('inputs/bench.csv')\ndf.to_csv('outputs/copy.csv', index=False)\nint(df.b.sum())"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "6", r.Result)
	require.Len(t, r.Artifacts, 1)
	require.Equal(t, "copy.csv", r.Artifacts[0].Name)
	fi, err := os.Stat(filepath.Join(e.WS.Root(), "sessions", "d1", "outputs", "copy.csv"))
	require.NoError(t, err)
	require.NotNil(t, fi)

	// The sandbox, seen from inside the kernel.
	r = e.run(t, "d1", `import os
status = open('/proc/self/status').read()
cap = [l.split()[1] for l in status.splitlines() if l.startswith('CapEff')][0]
nnp = [l.split()[1] for l in status.splitlines() if l.startswith('NoNewPrivs')][0]
try:
    open('/usr/kernelbox-probe', 'w'); ro = False
except OSError as e:
    ro = e.errno == 30
print(sorted(os.listdir('/sys/class/net')), cap, nnp, ro, os.getuid() != 0, os.getcwd())`)
	require.Equal(t, "['lo'] 0000000000000000 1 True True /workspace\n", r.Stdout)

	// Two sessions cannot see each other's files.
	e.run(t, "d1", "open('outputs/secret.txt', 'w').write('d1 only')")
	// (Every writable or mounted place; / as a whole would walk /proc and /sys.)
	r = e.run(t, "d2", "import glob\nsorted(p for d in ('/workspace', '/tmp', '/run', '/mnt', '/home', '/srv', '/var', '/media', '/opt') for p in glob.glob(d + '/**/secret.txt', recursive=True))")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "[]", r.Result)

	require.NoError(t, e.Close())
	require.Empty(t, dockerContainers(t), "Close leaves no container")
}

func TestDockerLimits(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newDockerEnv(t, testexec.Real{Memory: 512 << 20, PidsLimit: 128}, nil)
	e.run(t, "lim", "x = 1")

	// A fork bomb hits the pids limit; the session reports cleanly and survives.
	r, err := e.Execute(context.Background(), api.Request{SessionID: "lim", Timeout: 20 * time.Second, Code: `import os, time
pids = []
try:
    for i in range(10000):
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        pids.append(pid)
except OSError as e:
    print("fork failed after", len(pids), e.strerror)
for p in pids:
    os.kill(p, 9)
    os.waitpid(p, 0)
len(pids) < 128`})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Contains(t, r.Stdout, "fork failed after")
	require.Equal(t, "True", r.Result)
	require.Equal(t, "1", e.run(t, "lim", "x").Result)

	// Allocating 4 GiB over a 512 MiB limit: kernel_died with the OOM cause; the next
	// call works.
	r = e.run(t, "lim", "b = bytearray(4 << 30)\nb[::4096] = b'x' * len(b[::4096])")
	require.Equal(t, api.StatusKernelDied, r.Status, "%+v", r.Error)
	require.Contains(t, r.Error.Evalue, "OOM")
	require.True(t, r.StateLost)
	r = e.run(t, "lim", "1 + 1")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "2", r.Result)
}

func TestDockerFaults(t *testing.T) {
	e := newDockerEnv(t, testexec.Real{}, func(o *executor.Options) { o.InterruptGrace = 2 * time.Second })
	e.run(t, "f", "x = 3")
	start := time.Now()
	r, err := e.Execute(context.Background(), api.Request{SessionID: "f", Code: "while True: pass", Timeout: 2 * time.Second})
	require.NoError(t, err)
	require.Equal(t, api.StatusTimeout, r.Status)
	require.False(t, r.StateLost)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, "3", e.run(t, "f", "x").Result)

	r = e.run(t, "f", "import os; os._exit(1)")
	require.Equal(t, api.StatusKernelDied, r.Status)
	r = e.run(t, "f", "1")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.True(t, r.StateLost)

	// The container killed from outside mid-cell: the call returns, the session
	// recovers in a new container.
	e.run(t, "f", "y = 1")
	ids := dockerContainers(t)
	require.Len(t, ids, 1)
	done := make(chan *api.Result, 1)
	go func() {
		r, _ := e.Execute(context.Background(), api.Request{SessionID: "f", Code: "import time; time.sleep(60)"})
		done <- r
	}()
	time.Sleep(time.Second)
	require.NoError(t, exec.Command("docker", "kill", ids[0]).Run())
	killed := time.Now()
	select {
	case r := <-done:
		took := time.Since(killed)
		t.Logf("docker kill mid-call reported after %s: %s", took.Round(time.Millisecond), r.Error.Evalue)
		require.NotNil(t, r)
		require.Equal(t, api.StatusKernelDied, r.Status, "%+v", r.Error)
		require.Contains(t, r.Error.Evalue, "container")
		// Told by the container's watch (Lost), not after the connection's 5 s
		// reconnect bound.
		require.Less(t, took, 2*time.Second)
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not return after its container was killed")
	}
	r = e.run(t, "f", "'y' in dir()")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "False", r.Result)
	require.True(t, r.StateLost)
}

// TestDockerSoak runs mixed calls with random faults, containers killed from outside
// among them, and counts what is left from Docker.
func TestDockerSoak(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go (it kills only its own sessions' containers)
	n := 200
	if testenv.Short() {
		n = 60
	}
	e := newDockerEnv(t, testexec.Real{}, func(o *executor.Options) { o.InterruptGrace = time.Second; o.QueueSize = 64 })
	var kills atomic.Int32
	soak(t, e, n, func(rng *rand.Rand, session string) string {
		// Kill some container of the soak's sessions from outside while this
		// call runs.
		ids := sessionsContainers(t, "soak")
		if len(ids) > 0 {
			id := ids[rng.IntN(len(ids))]
			go func() {
				time.Sleep(300 * time.Millisecond)
				_ = exec.Command("docker", "kill", id).Run()
			}()
			kills.Add(1)
		}
		return "import time\ntime.sleep(1)"
	})
	t.Logf("containers killed from outside: %d", kills.Load())
	require.NoError(t, e.Close())
	require.Empty(t, sessionsContainers(t, "soak"), "containers left after Close")
}

// sessionsContainers lists this test process's containers, stopped ones included,
// of the sessions whose ids start with prefix.
func sessionsContainers(t testing.TB, prefix string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label="+testexec.LabelSession,
		"--format", `{{.ID}} {{.Label "`+testexec.LabelOwner+`"}} {{.Label "`+testexec.LabelSession+`"}}`).Output()
	require.NoError(t, err)
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && strings.HasPrefix(f[1], strconv.Itoa(os.Getpid())+":") && strings.HasPrefix(f[2], prefix) {
			ids = append(ids, f[0])
		}
	}
	return ids
}
