package executor_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
	"github.com/kernelbox/kernelbox/internal/testkit/testnet"
)

// The docker backend's sessions under gVisor (runtime runsc, reached through the
// relay): the same features as under runc. They need runsc registered
// (scripts/setup.sh --gvisor); KERNELBOX_REQUIRE_RUNSC=1 (CI) fails them without.

// newRunscEnv is newDockerEnv under gVisor.
func newRunscEnv(t testing.TB, r testexec.Real, mod func(*executor.Options)) *env {
	t.Helper()
	r.Runtime = "runsc"
	return newDockerEnv(t, r, mod)
}

// killRelay is code that kills the session's relay from inside the kernel, as a
// prompt-injected model could (the relay runs as the kernel's user).
const killRelay = `import os, signal
for d in os.listdir("/proc"):
    if d.isdigit():
        try:
            cmd = open("/proc/%s/cmdline" % d, "rb").read()
        except OSError:
            continue
        if b"relay.sock" in cmd and int(d) != os.getpid():
            os.kill(int(d), signal.SIGKILL)
`

// TestRunscSessions: state, inputs and artifacts, a timeout (an interrupt), a
// kernel's death, the container killed from outside and the relay killed from
// inside, each told and followed by a working call.
func TestRunscSessions(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newRunscEnv(t, testexec.Real{}, func(o *executor.Options) { o.InterruptGrace = 2 * time.Second })
	start := time.Now()
	r := e.run(t, "gsess", "x = 41")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	t.Logf("runsc cold start to first result: %s", time.Since(start).Round(time.Millisecond))
	require.Equal(t, "42", e.run(t, "gsess", "x + 1").Result)
	require.Equal(t, "'4.4.0'", e.run(t, "gsess", "import os; os.uname().release").Result)

	csv := filepath.Join(e.Data, "g.csv")
	require.NoError(t, os.WriteFile(csv, []byte("a,b\n1,2\n3,4\n"), 0o644))
	r, err := e.Execute(context.Background(), api.Request{SessionID: "gsess", Inputs: []string{csv},
		Code: "import csv\nrows = list(csv.DictReader(open('inputs/g.csv')))\nopen('outputs/copy.csv', 'w').write('b\\n' + str(sum(int(r['b']) for r in rows)))\nlen(rows)"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "2", r.Result)
	require.Len(t, r.Artifacts, 1)
	b, err := os.ReadFile(filepath.Join(e.WS.Root(), "sessions", "gsess", "outputs", "copy.csv"))
	require.NoError(t, err)
	require.Equal(t, "b\n6", string(b))

	start = time.Now()
	r, err = e.Execute(context.Background(), api.Request{SessionID: "gsess", Code: "while True: pass", Timeout: 2 * time.Second})
	require.NoError(t, err)
	require.Equal(t, api.StatusTimeout, r.Status)
	require.False(t, r.StateLost)
	require.Less(t, time.Since(start), 10*time.Second, "a timeout returns after its interrupt grace, ptrace and load aside")
	require.Equal(t, "41", e.run(t, "gsess", "x").Result)

	r = e.run(t, "gsess", "import os; os._exit(1)")
	require.Equal(t, api.StatusKernelDied, r.Status)
	r = e.run(t, "gsess", "y = 1")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.True(t, r.StateLost)

	// The relay killed by the kernel: told, and the session's next call runs in
	// a new container, with the state lost as after a death.
	r = e.run(t, "gsess", killRelay)
	t.Logf("relay killed: status %s, error %+v", r.Status, r.Error)
	require.Equal(t, api.StatusKernelDied, r.Status, "%+v", r.Error)
	require.Contains(t, r.Error.Evalue, "relay")
	r = e.run(t, "gsess", "'y' in dir()")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "False", r.Result)
	require.True(t, r.StateLost)
}

// TestRunscEgress: a template's allowlist under gVisor, the template's own
// runtime on a backend whose default is runc. The relay forwards the
// kernel's proxy port to the proxy's socket in the state directory (no socket in
// the sandbox is reachable from the host): an allowed fetch works, a denied one is
// refused by the proxy with its rule, and a direct connection finds no route.
func TestRunscEgress(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testnet.Require(t)
	testenv.Runsc(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data.csv"), []byte("city,n\nOslo,3\n"), 0o644))
	web := testnet.New(t, "gweb", dir)
	priv := testnet.New(t, "gpriv", dir)
	port := strconv.Itoa(web.Port)
	ts := loadTemplates(t, `{"templates": [{"name": "fetch", "runtime": "runsc",
	  "network": {"allow": ["files.test:`+port+`"], "cidrs": ["`+web.Prefix.String()+`"]}}]}`, dockerCaps)
	e := newDockerEnv(t, testexec.Real{EgressTestHosts: map[string][]netip.Addr{
		"files.test": {web.Addr}, "private.test": {priv.Addr},
	}}, func(o *executor.Options) {
		o.Templates = ts
		o.StartTimeout = 3 * time.Minute
	})
	exec := func(code string) *api.Result {
		t.Helper()
		r, err := e.Execute(context.Background(), api.Request{SessionID: "gnet", Template: "fetch", Code: code})
		require.NoError(t, err)
		return r
	}
	r := exec("import urllib.request, urllib.error, time, os\nprint(os.uname().release)\nprint(urllib.request.urlopen('http://files.test:" + port + "/data.csv', timeout=30).read().decode(), end='')")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "4.4.0\ncity,n\nOslo,3\n", r.Stdout, "the template's runtime: gVisor")
	require.True(t, hasNote(r.Notes, "network: allow files.test:"+port+" via "+web.Addr.String()), "%q", r.Notes)
	refused(t, exec, "private.test", port, "default deny")
	r = exec(`import socket
s = socket.socket(); s.settimeout(5)
try:
    s.connect(("` + web.Addr.String() + `", ` + port + `)); print("connected")
except OSError as e:
    print(type(e).__name__, e.errno)`)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	// gVisor's netstack says EHOSTUNREACH where Linux says ENETUNREACH.
	require.Contains(t, []string{"OSError 101\n", "OSError 113\n"}, r.Stdout, "no route from the sandbox")
}

// TestRunscWarmTemplate: a template with a preload and a warm pool under runsc
// (its own runtime, on a runc backend): the warm container's kernel has run the
// preload, a session takes it at once, and the next kernel of the pool is made
// the same way.
func TestRunscWarmTemplate(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Runsc(t)
	ts := loadTemplates(t, `{"templates": [{"name": "gwarm", "runtime": "runsc", "warm": 1,
	  "preload": "import json, os\nW = os.uname().release"}]}`, dockerCaps)
	e := newDockerEnv(t, testexec.Real{}, func(o *executor.Options) {
		o.Templates = ts
		o.StartTimeout = 3 * time.Minute
	})
	waitWarm(t, e, "gwarm", 1)
	t0 := time.Now()
	r, err := e.Execute(context.Background(), api.Request{SessionID: "gw1", Template: "gwarm", Code: "W"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	t.Logf("runsc warm first result: %s", time.Since(t0).Round(time.Millisecond))
	require.Equal(t, "'4.4.0'", r.Result, "the preload ran under gVisor")
	waitWarm(t, e, "gwarm", 1)
}

// TestRunscHibernateTimes: hibernate and resume of 10 and 100 MB under runsc,
// every value back (the snapshot written and read through gVisor's gofer),
// measured beside TestDockerHibernateTimes (README, "gVisor"). What a snapshot
// holds is runtime-independent and tested on runc (TestDockerHibernateResume).
func TestRunscHibernateTimes(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	hibernateTimes(t, newDillDockerEnvWith(t, testexec.Real{Runtime: "runsc"}, nil), "gtime")
}

// TestRunscR: an R session (IRkernel, the kernel-r image) under gVisor, with the
// same checks as on runc (rSession: state, an R error, plots as artifacts, a
// staged CSV).
func TestRunscR(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Image(t, testexec.RImage)
	rSession(t, newEnvOn(t, testexec.DockerWith(t, testexec.Real{R: true, Runtime: "runsc"}), func(o *executor.Options) { o.Kernel = "ir" }))
}

// TestRunscCheckpointAfterOOM: under gVisor an OOM kill takes the whole sandbox;
// it is told as an OOM kill, and the session comes back in a new container with
// its last checkpoint's namespace (written by the kernel through the gofer,
// restored in the new sandbox).
func TestRunscCheckpointAfterOOM(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newDillDockerEnvWith(t, testexec.Real{Memory: 256 << 20, Runtime: "runsc"}, func(o *executor.Options) {
		o.Checkpoint = executor.CheckpointAfterCall
	})
	const id = "gck-oom"
	r := e.run(t, id, "import numpy as np\narr = np.arange(1000)\nx = 41")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	r = e.run(t, id, "b = bytearray(400 << 20)\nb[::4096] = b'x' * len(b[::4096])")
	require.Equal(t, api.StatusKernelDied, r.Status, "%+v", r.Error)
	require.Contains(t, r.Error.Evalue, "OOM")
	r = e.run(t, id, "print(x + 1, int(arr.sum()), 'b' in dir())")
	requireRestored(t, r, 1)
	require.Equal(t, "42 499500 False\n", r.Stdout)
}
