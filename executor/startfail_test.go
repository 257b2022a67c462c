package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// dyingKernels returns a local backend whose kernels exit as they start, the first
// deaths times (counted across kernels and restarts), or always when deaths < 0. The
// server restarts a kernel that dies as it starts five times, then drops it.
func dyingKernels(t *testing.T, deaths int) *testexec.Marked {
	t.Helper()
	dir := t.TempDir()
	// Kernels are the only processes started with a connection file (-f).
	site := `import os, sys
if "-f" in sys.argv:
    limit, count = int(os.environ["KB_TEST_DEATHS"]), os.environ["KB_TEST_COUNT"]
    n = len(open(count).read()) if os.path.exists(count) else 0
    if limit < 0 or n < limit:
        open(count, "a").write("x")
        sys.stderr.write("kernelbox test: this kernel exits as it starts\n")
        os._exit(3)
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sitecustomize.py"), []byte(site), 0o644))
	return testexec.LocalWith(t, testexec.Real{Env: []string{
		"PYTHONPATH=" + dir,
		"KB_TEST_DEATHS=" + strconv.Itoa(deaths),
		"KB_TEST_COUNT=" + filepath.Join(dir, "count"),
	}})
}

// A kernel the server drops while it starts is replaced: the call still runs.
func TestLocalKernelDroppedAtStartIsReplaced(t *testing.T) {
	if testenv.Short() {
		t.Skip("long")
	}
	e := newLocalEnv(t, dyingKernels(t, 6), nil)
	start := time.Now()
	r, err := e.Execute(context.Background(), api.Request{SessionID: "s", Code: "x = 41\nx + 1"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "42", r.Result)
	require.False(t, r.StateLost, "a kernel that never ran code loses nothing")
	t.Logf("first result after one dropped kernel: %s", time.Since(start))
	require.Equal(t, "42", e.run(t, "s", "x + 1").Result)
}

// A server that drops every kernel gives a clear error soon, with its log, instead of
// waiting out a WebSocket handshake per kernel.
func TestLocalKernelThatAlwaysDiesFailsClearly(t *testing.T) {
	if testenv.Short() {
		t.Skip("long")
	}
	e := newLocalEnv(t, dyingKernels(t, -1), nil)
	start := time.Now()
	_, err := e.Execute(context.Background(), api.Request{SessionID: "s", Code: "1"})
	took := time.Since(start)
	require.ErrorIs(t, err, api.ErrBackend)
	msg := err.Error()
	require.Contains(t, msg, "the server dropped 3 kernels in a row right after starting them")
	require.Contains(t, msg, "kernelbox test: this kernel exits as it starts")
	require.Contains(t, msg, "restart failed")
	require.NotContains(t, msg, "<html", "an HTML error page is reduced to its text")
	require.NotContains(t, msg, "404 GET", "the server's request log lines are left out")
	t.Logf("failed after %s: %v", took, err)
	// Three kernels, each restarted five times 0.5 s apart; before the handshake
	// was cut short this took 90 s.
	require.Less(t, took, 45*time.Second)
}
