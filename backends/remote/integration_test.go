package remote_test

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/remote"
)

func TestStateAndFiles(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	s, root := startGateway(t)
	b := newBackend(t, []remote.Gateway{gw(s)}, nil)
	e := newEnv(t, b, nil)

	r := e.run(t, "s1", "x = 41")
	ok(t, r)
	require.Equal(t, 1, r.ExecutionCount)
	r = e.run(t, "s1", "import os; print(os.getcwd()); x + 1")
	ok(t, r)
	require.Equal(t, "42", r.Result)
	require.Equal(t, 2, r.ExecutionCount, "file sync must not count executions")
	requireSessionDir(t, root, "s1", strings.TrimSuffix(r.Stdout, "\n"))

	// An input, staged through the kernel, arrives intact.
	in := make([]byte, 3<<20+12345)
	_, _ = rand.Read(in)
	src := filepath.Join(e.Data, "blob.bin")
	require.NoError(t, os.WriteFile(src, in, 0o644))
	r = e.run(t, "s1", "import hashlib\nhashlib.sha256(open('inputs/blob.bin','rb').read()).hexdigest()", src)
	ok(t, r)
	require.Equal(t, "'"+sha(in)+"'", r.Result)
	require.Equal(t, 3, r.ExecutionCount)

	// An output written by the kernel becomes an artifact with the kernel's checksum.
	r = e.run(t, "s1", strings.Join([]string{
		"import hashlib, os",
		"os.makedirs('outputs/sub', exist_ok=True)",
		"data = os.urandom(9_000_000)",
		"open('outputs/sub/big.bin','wb').write(data)",
		"open('outputs/small.txt','w').write('hello')",
		"hashlib.sha256(data).hexdigest()",
	}, "\n"))
	ok(t, r)
	names := map[string]string{}
	for _, a := range r.Artifacts {
		names[a.Name] = a.SHA256
		require.Equal(t, fileSHA(t, a.Path), a.SHA256)
	}
	require.Equal(t, strings.Trim(r.Result, "'"), names["sub/big.bin"], "%v", r.Notes)
	require.Equal(t, sha([]byte("hello")), names["small.txt"])

	// Unchanged outputs are not reported again.
	r = e.run(t, "s1", "x")
	ok(t, r)
	require.Empty(t, r.Artifacts, "%v", r.Notes)
	require.Equal(t, 5, r.ExecutionCount)
}
