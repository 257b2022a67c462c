package remote_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/backends/remote"
	"github.com/kernelbox/kernelbox/executor"
)

// TestSyncLeavesUserStateAlone checks that file sync is invisible to the user's
// code: execution counts, In/Out history, _ and the namespace.
func TestSyncLeavesUserStateAlone(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	s, _ := startGateway(t)
	e := newEnv(t, newBackend(t, []remote.Gateway{gw(s)}, nil), nil)
	in := filepath.Join(e.Data, "a.txt")
	require.NoError(t, os.WriteFile(in, []byte("a"), 0o644))
	ok(t, e.run(t, "u", "names0 = set(dir())"))
	r := e.run(t, "u", "40 + 2", in)
	ok(t, r)
	require.Equal(t, 2, r.ExecutionCount)
	r = e.run(t, "u", "open('outputs/o.txt','w').write('o')\n_")
	ok(t, r)
	require.Equal(t, "42", r.Result, "_ must still be the last result")
	r = e.run(t, "u", "(len(In), sorted(set(dir()) - names0 - {'names0'}), Out[2])")
	ok(t, r)
	require.Equal(t, 4, r.ExecutionCount)
	// Only the user's own cells left names behind (Out[3] is the _ of cell 3).
	require.Equal(t, "(5, ['_2', '_3', '_i2', '_i3', '_i4'], 42)", r.Result)
}

// TestFreshKernelIsSetUpAgain checks that a kernel that restarted (its death, a
// reset) works in the session's directory again and still has its inputs.
func TestFreshKernelIsSetUpAgain(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	s, root := startGateway(t)
	e := newEnv(t, newBackend(t, []remote.Gateway{gw(s)}, nil), nil)
	in := filepath.Join(e.Data, "keep.txt")
	require.NoError(t, os.WriteFile(in, []byte("kept"), 0o644))
	want, r := cwd(t, e, "fr")
	requireSessionDir(t, root, "fr", want)
	ok(t, e.run(t, "fr", "1", in))

	check := func(what string, lost bool) {
		t.Helper()
		r := e.run(t, "fr", "import os\nprint(os.getcwd(), end='')\nopen('inputs/keep.txt').read()")
		ok(t, r)
		require.Equal(t, want, r.Stdout, what)
		require.Equal(t, "'kept'", r.Result, what)
		require.Equal(t, lost, r.StateLost, what)
	}

	// The server restarts a kernel that died under the same id.
	r = e.run(t, "fr", "import os; os.chdir('/'); os._exit(1)")
	require.Equal(t, api.StatusKernelDied, r.Status)
	check("after a kernel death", true)

	ok(t, e.run(t, "fr", "import os; os.chdir('/')"))
	require.NoError(t, e.ResetSession(context.Background(), "fr"))
	check("after a reset", false) // asked for: not reported as lost
}

// TestChangedOutputsAreCollected rewrites an output with the same size within the
// file system's timestamp granularity: the change must still be seen.
func TestChangedOutputsAreCollected(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	s, _ := startGateway(t)
	e := newEnv(t, newBackend(t, []remote.Gateway{gw(s)}, nil), nil)
	for _, content := range []string{"aaaa", "bbbb", "cccc"} {
		r := e.run(t, "ch", "open('outputs/same.txt','w').write('"+content+"')")
		ok(t, r)
		require.Len(t, r.Artifacts, 1, "%q: %v", content, r.Notes)
		b, err := os.ReadFile(r.Artifacts[0].Path)
		require.NoError(t, err)
		require.Equal(t, content, string(b))
	}
	// Unchanged: nothing new, even while the file is recent.
	r := e.run(t, "ch", "1")
	require.Empty(t, r.Artifacts)
	time.Sleep(2100 * time.Millisecond)
	r = e.run(t, "ch", "1")
	require.Empty(t, r.Artifacts)
	// Many small files in one call, in subdirectories.
	r = e.run(t, "ch", "import os\nfor i in range(50):\n    os.makedirs(f'outputs/d{i%5}', exist_ok=True)\n    open(f'outputs/d{i%5}/f{i}.txt','w').write(str(i))")
	ok(t, r)
	require.Len(t, r.Artifacts, 50, "%v", r.Notes)
}

// TestDataAndWarmPool checks that data mounts reach the remote kernel (read-only)
// and that a warm kernel gets the directory of the session that takes it.
func TestDataAndWarmPool(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	s, root := startGateway(t)
	e := newEnv(t, newBackend(t, []remote.Gateway{gw(s)}, nil), func(o *executor.Options) {
		// Under the policy's workdir, so reading it is allowed.
		hostData := filepath.Join(o.Permissions.Vars.Workdir, "ref")
		require.NoError(t, os.MkdirAll(filepath.Join(hostData, "sub"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(hostData, "sub", "d.csv"), []byte("a,b\n1,2\n"), 0o644))
		o.Data = []executor.DataMount{{Name: "ref", HostDir: hostData}}
		o.Warm = 1
	})
	require.Eventually(t, func() bool { return e.WarmReady() == 1 }, time.Minute, 20*time.Millisecond)
	r := e.run(t, "wp", "import os, stat\nprint(os.getcwd(), end='')\n(open('data/ref/sub/d.csv').read(), oct(stat.S_IMODE(os.stat('data/ref/sub/d.csv').st_mode)))")
	ok(t, r)
	requireSessionDir(t, root, "wp", r.Stdout)
	require.Equal(t, `('a,b\n1,2\n', '0o444')`, r.Result)
	require.False(t, strings.Contains(r.Stdout, ".warm"))
}

// TestLiteralPayloads covers kernels that do not let code read the request being
// handled: payloads then travel as literals in the expression.
func TestLiteralPayloads(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	s, _ := startGateway(t)
	e := newEnv(t, newBackend(t, []remote.Gateway{gw(s)}, nil), nil)
	ok(t, e.run(t, "lit", "import sys\nm = [v for k, v in sys.modules.items() if k.startswith('_kernelbox_sync_')][0]\nm._parent = lambda: {}"))
	in := filepath.Join(e.Data, "lit.bin")
	data := make([]byte, 2<<20+7) // chunked: more than ChunkBytes
	for i := range data {
		data[i] = byte(i * 7)
	}
	require.NoError(t, os.WriteFile(in, data, 0o644))
	r := e.run(t, "lit", "import hashlib\nhashlib.sha256(open('inputs/lit.bin','rb').read()).hexdigest()", in)
	ok(t, r)
	require.Equal(t, "'"+sha(data)+"'", r.Result)
}
