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

	"github.com/kernelbox/kernelbox/backends/remote"
)

// lsCode lists the session directory's inputs/ and outputs/ from inside the kernel.
const lsCode = "import os\nprint(os.getcwd(), end='')\n(sorted(os.listdir('inputs')), sorted(os.listdir('outputs')))"

// sessionDirs lists what is left under a gateway root's kernelbox-sessions/.
func sessionDirs(t *testing.T, root string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(root, "kernelbox-sessions"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// firstIncarnation runs a session that stages inputs/in.csv and writes
// outputs/o.txt, and returns its directory on the gateway.
func firstIncarnation(t *testing.T, e *env, id string) string {
	t.Helper()
	in := filepath.Join(e.Data, "in.csv")
	require.NoError(t, os.WriteFile(in, []byte("a,b\n1,2\n"), 0o644))
	r := e.run(t, id, "import os\nprint(os.getcwd(), end='')\nopen('outputs/o.txt','w').write('first')", in)
	ok(t, r)
	require.Len(t, r.Artifacts, 1, "%v", r.Notes)
	return r.Stdout
}

// TestSessionDirNotReusedByName is issue 20 item 9: a second kernelbox (its own
// workspace) that opens a session with the id of one still running on the same
// gateway gets a directory of its own, empty: none of the first one's inputs, no
// artifact it did not write, and a file it writes with the first one's content is
// reported.
func TestSessionDirNotReusedByName(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	s, _ := startGateway(t)
	e1 := newEnv(t, newBackend(t, []remote.Gateway{gw(s)}, nil), nil)
	dir1 := firstIncarnation(t, e1, "same")

	e2 := newEnv(t, newBackend(t, []remote.Gateway{gw(s)}, nil), nil)
	r := e2.run(t, "same", lsCode)
	ok(t, r)
	require.NotEqual(t, dir1, r.Stdout, "both kernelboxes work in one directory")
	require.Equal(t, "([], [])", r.Result, "the second kernelbox sees the first one's files")
	require.Empty(t, r.Artifacts, "the second kernelbox reports the first one's outputs as its own")

	r = e2.run(t, "same", "open('outputs/o.txt','w').write('first')")
	ok(t, r)
	require.Len(t, r.Artifacts, 1, "an output with the first incarnation's content is not reported: %v", r.Notes)
}

// TestSessionDirRemovedOnClose checks that a session's directory on the gateway
// goes with the session (CloseSession) and with kernelbox (Close), and that the
// next incarnation of the id starts empty.
func TestSessionDirRemovedOnClose(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	s, root := startGateway(t)
	e := newEnv(t, newBackend(t, []remote.Gateway{gw(s)}, nil), nil)
	firstIncarnation(t, e, "c1")
	ok(t, e.run(t, "c2", "open('outputs/x.txt','w').write('x')"))
	require.Len(t, sessionDirs(t, root), 2)

	require.NoError(t, e.CloseSession(context.Background(), "c1"))
	names := sessionDirs(t, root)
	require.Len(t, names, 1, "closing c1 left %v", names)
	require.True(t, strings.HasPrefix(names[0], "c2"), "%v", names)

	r := e.run(t, "c1", lsCode)
	ok(t, r)
	require.Equal(t, "([], [])", r.Result)
	require.Empty(t, r.Artifacts)

	require.NoError(t, e.Close())
	require.Empty(t, sessionDirs(t, root), "kernelbox's shutdown left session directories behind")
}

// TestCrashedSessionDirIsReaped kills a gateway with its kernels (a crash: nothing
// runs their clean-up), starts it again on the same root and opens sessions there:
// the dead session's directory is reaped once its heartbeat is older than
// Sync.ReapAfter, while a live session idle for longer than that keeps its own.
func TestCrashedSessionDirIsReaped(t *testing.T) {
	t.Parallel() // its own gateways and sessions; its one time check is a lower bound (not reaped too early), which load cannot break
	const reapAfter = 4 * time.Second
	short := func(o *remote.Options) { o.Sync.ReapAfter = reapAfter }
	root := t.TempDir()
	s, real := startGatewayAt(t, root)
	e1 := newEnv(t, newBackend(t, []remote.Gateway{gw(s)}, short), nil)
	dead := firstIncarnation(t, e1, "crash")
	require.NoError(t, syscall.Kill(-s.Pid(), syscall.SIGKILL))
	killed := time.Now()

	s2, _ := startGatewayAt(t, root)
	e2 := newEnv(t, newBackend(t, []remote.Gateway{gw(s2)}, short), nil)
	live, _ := cwd(t, e2, "live") // its setup reaps too, but the dead heartbeat may still be fresh
	if time.Since(killed) < reapAfter-time.Second {
		require.DirExists(t, dead, "reaped before its heartbeat was %s old", reapAfter)
	}
	time.Sleep(time.Until(killed.Add(reapAfter + time.Second)))

	other, _ := cwd(t, e2, "other") // its setup starts the reaper
	require.Eventually(t, func() bool {
		_, err := os.Lstat(dead)
		return os.IsNotExist(err)
	}, 10*time.Second, 20*time.Millisecond, "the crashed session's directory was not reaped")
	require.ElementsMatch(t, []string{filepath.Base(live), filepath.Base(other)}, sessionDirs(t, real))
	r := e2.run(t, "live", lsCode)
	ok(t, r)
	require.Equal(t, live, r.Stdout)
}
