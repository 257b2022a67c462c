package remote_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/backends/remote"
)

// cwd runs os.getcwd() in the session and returns it.
func cwd(t *testing.T, e *env, session string) (string, *api.Result) {
	t.Helper()
	r := e.run(t, session, "import os\nprint(os.getcwd(), end='')")
	ok(t, r)
	return r.Stdout, r
}

// waitHealth waits until the gateway at url has the given health.
func waitHealth(t *testing.T, b *remote.Backend, url string, healthy bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, g := range b.Gateways() {
			if g.URL == url {
				return g.Healthy == healthy
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond, "gateway %s never became healthy=%v: %+v", url, healthy, b.Gateways())
}

func TestPlacementSpreadsAndFailsOver(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	sA, rootA := startGateway(t)
	sB, rootB := startGateway(t)
	b := newBackend(t, []remote.Gateway{gw(sA), gw(sB)}, nil)
	e := newEnv(t, b, nil)

	// Two sessions land on different gateways.
	dir1, _ := cwd(t, e, "s1")
	dir2, _ := cwd(t, e, "s2")
	roots := map[string]string{rootA: "A", rootB: "B"}
	on := func(dir string) string { return roots[strings.TrimSuffix(filepath.Dir(filepath.Dir(dir)), "/")] }
	require.NotEmpty(t, on(dir1), dir1)
	require.NotEmpty(t, on(dir2), dir2)
	require.NotEqual(t, on(dir1), on(dir2), "sessions should spread: %s %s", dir1, dir2)
	for _, g := range b.Gateways() {
		require.True(t, g.Healthy)
		require.Equal(t, 1, g.Sessions, "%+v", b.Gateways())
	}

	// State in both; s1 also has an input.
	in := filepath.Join(e.Data, "in.txt")
	require.NoError(t, os.WriteFile(in, []byte("carried over"), 0o644))
	ok(t, e.run(t, "s1", "x = 'one'", in))
	ok(t, e.run(t, "s2", "x = 'two'"))

	// Kill s1's gateway.
	dead, live, liveRoot, deadRoot := sA, sB, rootB, rootA
	if on(dir1) == "B" {
		dead, live, liveRoot, deadRoot = sB, sA, rootA, rootB
	}
	require.NoError(t, dead.Stop(context.Background()))
	// A gateway that stops cleanly shuts its kernels down, which removes their
	// directories.
	require.Empty(t, sessionDirs(t, deadRoot), "the stopped gateway kept the moved session's directory")
	waitHealth(t, b, dead.Endpoint().URL, false)
	waitHealth(t, b, live.Endpoint().URL, true)

	// s1's next call runs on the live gateway, with its state lost and its input
	// carried over.
	r := e.run(t, "s1", "import os\nprint(os.getcwd(), end='')\n('x' in dir(), open('inputs/in.txt').read())")
	ok(t, r)
	require.True(t, r.StateLost, "%+v", r)
	require.Equal(t, "(False, 'carried over')", r.Result)
	requireSessionDir(t, liveRoot, "s1", r.Stdout)
	require.Contains(t, strings.Join(r.Notes, "\n"), "state lost")

	// s2 was not touched.
	r = e.run(t, "s2", "x")
	ok(t, r)
	require.False(t, r.StateLost)
	require.Equal(t, "'two'", r.Result)

	// New sessions go only to the live gateway.
	for _, id := range []string{"s3", "s4"} {
		dir, r := cwd(t, e, id)
		requireSessionDir(t, liveRoot, id, dir)
		require.False(t, r.StateLost)
	}
	for _, g := range b.Gateways() {
		if g.URL == dead.Endpoint().URL {
			require.False(t, g.Healthy)
			require.Contains(t, g.Error, "unreachable")
			require.Zero(t, g.Sessions)
		} else {
			require.Equal(t, 4, g.Sessions)
		}
	}
	require.NoError(t, b.Health(context.Background()))
}

func TestGatewayDiesDuringCall(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	sA, _ := startGateway(t)
	sB, rootB := startGateway(t)
	b := newBackend(t, []remote.Gateway{gw(sA), gw(sB)}, nil)
	e := newEnv(t, b, nil)
	dir, _ := cwd(t, e, "long") // the first session goes to the first gateway
	require.NotContains(t, dir, rootB)

	done := make(chan *api.Result, 1)
	go func() {
		r, _ := e.Execute(context.Background(), api.Request{SessionID: "long", Code: "import time\ntime.sleep(60)"})
		done <- r
	}()
	require.Eventually(t, func() bool {
		s, err := e.Session("long")
		return err == nil && s.State == "busy"
	}, 10*time.Second, 20*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	// An abrupt death (a crash, a lost node): a graceful Stop would interrupt the
	// kernel and answer the call before going.
	require.NoError(t, syscall.Kill(-sA.Pid(), syscall.SIGKILL))
	var r *api.Result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not end when its gateway died")
	}
	require.Equal(t, api.StatusKernelDied, r.Status, "%+v", r.Error)
	require.True(t, r.StateLost)
	require.Contains(t, r.Error.Evalue, "unreachable")
	require.Contains(t, r.Error.Evalue, sA.Endpoint().URL)

	// The next call starts over on the other gateway.
	dir, r = cwd(t, e, "long")
	requireSessionDir(t, rootB, "long", dir)
	require.True(t, r.StateLost)
}
