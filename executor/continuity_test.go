package executor_test

// Issue 46: continuity made safe. Each test is one of the outside fault pass's
// findings, on the local backend with real kernels; each failed on the main it
// was found on. The SIGKILL cases (a restore, a checkpoint in the middle) are in
// cmd/kernelbox's continuity tests, which kill a real serve.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// fileWriter writes files the way most Python does (with open(..., "w") as f),
// leaves an open one bound, one inside a container, and one by absolute path.
const fileWriter = `import os
with open("results.csv", "w") as f:
    f.write("a,b\n1,2\n")
abs_path = os.path.abspath("abs.txt")
g = open(abs_path, "w")
g.write("kept by abs path")
g.flush()
bag = {"g": g, "n": 3}
x = 1
`

// requireFilesWhole checks that dir's two files have the contents fileWriter wrote.
func requireFilesWhole(t *testing.T, dir, when string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "results.csv"))
	require.NoError(t, err, when)
	require.Equal(t, "a,b\n1,2\n", string(b), "%s: results.csv was changed", when)
	b, err = os.ReadFile(filepath.Join(dir, "abs.txt"))
	require.NoError(t, err, when)
	require.Equal(t, "kept by abs path", string(b), "%s: abs.txt was changed", when)
}

// Item 1: a restore never changes a file. dill re-opened file objects in their
// saved mode, and "w" emptied them: after a resume, a fork (on local, the
// original's file by its absolute path) and a checkpoint restore.
func TestLocalRestoreNeverTouchesFiles(t *testing.T) {
	t.Parallel()
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	e := newEnv(t, func(o *executor.Options) { o.Checkpoint = executor.CheckpointAfterCall })
	ctx := context.Background()
	const id = "files-w"
	dir := func(id string) string { return filepath.Join(e.WS.Root(), "sessions", id) }
	r := e.run(t, id, fileWriter)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)

	_, err := e.Hibernate(ctx, id)
	require.NoError(t, err)
	res, err := e.Resume(ctx, id)
	require.NoError(t, err)
	requireFilesWhole(t, dir(id), "after a resume")
	sr := res.StateRestored
	require.NotNil(t, sr)
	require.Contains(t, sr.NotRestored["f"], "closed file object ('results.csv', mode 'w')")
	require.Contains(t, sr.NotRestored["g"], "a restore never re-opens a file")
	require.Contains(t, sr.NotRestored["bag"], "closed stand-ins", "a file inside a value is named too")
	require.Contains(t, sr.Restored, "bag")
	r = e.run(t, id, "print(x, bag['n'], bag['g'].closed, 'f' in dir())")
	require.Equal(t, "1 3 True False\n", r.Stdout, "%+v", r.Error)

	_, err = e.Fork(ctx, id, id+"-fork")
	require.NoError(t, err)
	requireFilesWhole(t, dir(id), "the original after a fork")
	requireFilesWhole(t, dir(id+"-fork"), "the fork")

	r = e.run(t, id, "import os; os.kill(os.getpid(), 9)")
	require.Equal(t, api.StatusKernelDied, r.Status)
	r = e.run(t, id, "x")
	require.NotNil(t, r.StateRestored, "%q", r.Notes)
	require.Equal(t, "checkpoint", r.StateRestored.From)
	require.Equal(t, "1", r.Result)
	requireFilesWhole(t, dir(id), "after a checkpoint restore")
}

// Item 9: every name is saved or listed with a reason; IPython's history caches
// are listed as skipped by design; an instance of a class defined again since is
// not brought back as an instance of the new definition.
func TestLocalSnapshotNamesTold(t *testing.T) {
	t.Parallel()
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	e := newEnv(t, nil)
	ctx := context.Background()
	const id = "names"
	r := e.run(t, id, "__secret = 5\nexit = 7\nIn2 = 'mine'\nclass A:\n    def m(self): return 1\na = A()\nclass A:\n    def m(self): return 2\nb = A()")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	e.run(t, id, "1 + 1")
	e.run(t, id, "a.m() + b.m()")
	info, err := e.Hibernate(ctx, id)
	require.NoError(t, err)
	require.Contains(t, info.Snapshot.Names, "__secret")
	require.Contains(t, info.Snapshot.Names, "exit")
	require.Contains(t, info.Snapshot.Skipped["a"], "an instance of an earlier definition of class A")
	res, err := e.Resume(ctx, id)
	require.NoError(t, err)
	sr := res.StateRestored
	require.Contains(t, sr.Restored, "__secret")
	require.Contains(t, sr.Restored, "exit")
	require.Contains(t, sr.Restored, "b")
	require.Contains(t, sr.NotRestored, "a")
	require.Contains(t, sr.ByDesign["IPython's history caches"], "not saved by design", "%+v", sr)
	r = e.run(t, id, "print(__secret, exit, In2, b.m(), 'a' in dir())")
	require.Equal(t, "5 7 mine 2 False\n", r.Stdout, "%+v", r.Error)
}

// Item 8: a save that blocks is stopped at its bound (interrupted, its half file
// removed, the session live with its namespace), and a call queued behind it is
// answered within its own bound, not the save's.
func TestLocalBlockingSaveIsBounded(t *testing.T) {
	t.Parallel()
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	e := newEnv(t, func(o *executor.Options) { o.SnapshotTimeout = 6 * time.Second })
	ctx := context.Background()
	const id = "slow-save"
	r := e.run(t, id, "class Slow:\n    def __getstate__(self):\n        import time; time.sleep(120)\n        return {}\ns = Slow()\nx = 41")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)

	var herr error
	var hTook time.Duration
	done := make(chan struct{})
	t0 := time.Now()
	go func() {
		defer close(done)
		_, herr = e.Hibernate(ctx, id)
		hTook = time.Since(t0)
	}()
	time.Sleep(500 * time.Millisecond)
	c0 := time.Now()
	r, err := e.Execute(ctx, api.Request{SessionID: id, Code: "x + 1", Timeout: time.Second})
	cTook := time.Since(c0)
	require.NoError(t, err)
	require.Equal(t, api.StatusTimeout, r.Status, "%+v %q", r.Error, r.Notes)
	require.Contains(t, r.Error.Evalue, "while the session's hibernate ran; its code did not run")
	require.Less(t, cTook, 5*time.Second, "answered within its own bound (1 s + the grace), not the save's")
	<-done
	require.ErrorIs(t, herr, api.ErrCannotHibernate)
	require.Contains(t, herr.Error(), "saving the namespace was stopped after 6")
	require.Less(t, hTook, 20*time.Second, "bounded by the snapshot timeout and the interrupt")
	left, _ := filepath.Glob(snapshotPath(e, id) + "*")
	require.Empty(t, left, "no snapshot, whole or half, is left")
	r = e.run(t, id, "x + 1")
	require.Equal(t, "42", r.Result, "the session stays live with its namespace: %+v %q", r.Error, r.Notes)
	require.False(t, r.StateLost)
}

// Item 7: resumes at once do not take the live sessions past MaxSessions; the
// warm pool does not count hibernated sessions.
func TestLocalConcurrentResumesHonourMaxSessions(t *testing.T) {
	t.Parallel()
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	e := newEnv(t, func(o *executor.Options) { o.MaxSessions = 2 })
	ctx := context.Background()
	ids := []string{"mr-1", "mr-2", "mr-3", "mr-4"}
	for _, id := range ids {
		r := e.run(t, id, "x = '"+id+"'")
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		_, err := e.Hibernate(ctx, id)
		require.NoError(t, err)
	}
	var mu sync.Mutex
	ok, refused := 0, 0
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			_, err := e.Resume(ctx, id)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, api.ErrTooManySessions):
				refused++
			default:
				t.Errorf("resume %s: %v", id, err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, 2, ok, "two resumes fit")
	require.Equal(t, 2, refused, "the others are refused, told")
	live := 0
	for _, s := range e.Sessions() {
		if s.State != api.StateHibernated {
			live++
		}
	}
	require.Equal(t, 2, live)
}

// Item 10: a restore whose kernel dies leaves the session hibernated with its
// snapshot (never deleted), says so and how to recover; a reset discards it.
func TestLocalFailedRestoreKeepsSnapshot(t *testing.T) {
	t.Parallel()
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	e := newEnv(t, nil)
	ctx := context.Background()
	const id = "dies-on-load"
	r := e.run(t, id, "class Bomb:\n    def __setstate__(self, st):\n        import os; os._exit(1)\nbomb = Bomb()\nbomb.v = 1\nx = 41")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	_, err := e.Hibernate(ctx, id)
	require.NoError(t, err)
	_, err = e.Resume(ctx, id)
	require.ErrorIs(t, err, api.ErrCannotResume)
	require.Contains(t, err.Error(), "the kernel died while loading it")
	require.Contains(t, err.Error(), "it is kept and the session stays hibernated")
	info, err := e.Session(id)
	require.NoError(t, err)
	require.Equal(t, api.StateHibernated, info.State)
	_, err = os.Stat(snapshotPath(e, id))
	require.NoError(t, err, "the snapshot is kept")
	_, err = e.Execute(ctx, api.Request{SessionID: id, Code: "x"})
	require.ErrorIs(t, err, api.ErrCannotResume, "a call says the same")
	require.NoError(t, e.ResetSession(ctx, id))
	_, err = os.Stat(snapshotPath(e, id))
	require.ErrorIs(t, err, os.ErrNotExist, "a reset discards it")
	r = e.run(t, id, "'x' in dir()")
	require.Equal(t, "False", r.Result, "%+v", r.Error)
}

// Item 11: a fork whose source is closed meanwhile answers not found, not a
// client that went away (499).
func TestLocalForkOfClosedSource(t *testing.T) {
	t.Parallel()
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	e := newEnv(t, nil)
	ctx := context.Background()
	const id = "fork-src"
	r := e.run(t, id, "class Slow:\n    def __getstate__(self):\n        import time; time.sleep(30)\n        return {}\ns = Slow()")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	errc := make(chan error, 1)
	go func() {
		_, err := e.Fork(ctx, id, id+"-b")
		errc <- err
	}()
	time.Sleep(time.Second)
	require.NoError(t, e.CloseSession(ctx, id))
	err := <-errc
	require.ErrorIs(t, err, api.ErrNotFound, "%v", err)
	code, status := api.CodeOf(err)
	require.Equal(t, api.Code("not_found"), code)
	require.Equal(t, 404, status)
}

// newStatefulEnv builds an executor on the local backend over workspace root with
// a state directory, as serve does; the test closes it.
func newStatefulEnv(t *testing.T, root string, mod func(*executor.Options)) (*executor.Executor, *workspace.Manager) {
	t.Helper()
	state := filepath.Join(root, "state")
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(root, "ws"), Pinned: executor.PinnedSessions(state)})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	data := filepath.Join(root, "data")
	require.NoError(t, os.MkdirAll(data, 0o755))
	opts := executor.Options{
		Backend:   testexec.LocalBackend(t),
		Workspace: ws,
		Permissions: &permissions.Engine{Policy: permissions.DefaultPolicy(),
			Vars: permissions.Vars{Workdir: data, Home: root, Artifacts: ws.ArtifactsDir()}},
		StateDir: state,
		OnClose:  executor.StopKeep,
	}
	if mod != nil {
		mod(&opts)
	}
	e, err := executor.New(opts)
	require.NoError(t, err)
	return e, ws
}

// Item 2: a graceful stop keeps hibernated sessions hibernated and checkpointed
// sessions' checkpoints, whatever the policy (local's keep falls back to close).
func TestLocalStopKeepsHibernatedAndCheckpoints(t *testing.T) {
	t.Parallel()
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	root := t.TempDir()
	ctx := context.Background()
	for _, policy := range []executor.StopPolicy{executor.StopKeep, executor.StopClose} {
		e, ws := newStatefulEnv(t, root, func(o *executor.Options) {
			o.OnClose = policy
			o.Checkpoint = executor.CheckpointAfterCall
		})
		sleepID, ckID := "stop-h-"+string(policy), "stop-c-"+string(policy)
		r, err := e.Execute(ctx, api.Request{SessionID: sleepID, Code: "x = 'asleep'"})
		require.NoError(t, err)
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		_, err = e.Hibernate(ctx, sleepID)
		require.NoError(t, err)
		r, err = e.Execute(ctx, api.Request{SessionID: ckID, Code: "y = 'checkpointed'"})
		require.NoError(t, err)
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		require.NoError(t, e.Close())
		ws.Close()

		e, _ = newStatefulEnv(t, root, func(o *executor.Options) { o.Checkpoint = executor.CheckpointAfterCall })
		t.Cleanup(func() { _ = e.Close() })
		info, err := e.Session(sleepID)
		require.NoError(t, err, "policy %s", policy)
		require.Equal(t, api.StateHibernated, info.State, "policy %s", policy)
		r, err = e.Execute(ctx, api.Request{SessionID: sleepID, Code: "x"})
		require.NoError(t, err)
		require.Equal(t, "'asleep'", r.Result, "policy %s: %+v %q", policy, r.Error, r.Notes)
		require.False(t, r.StateLost, "policy %s: %q", policy, r.Notes)
		r, err = e.Execute(ctx, api.Request{SessionID: ckID, Code: "y"})
		require.NoError(t, err)
		require.Equal(t, "'checkpointed'", r.Result, "policy %s: %+v %q", policy, r.Error, r.Notes)
		require.NotNil(t, r.StateRestored, "policy %s", policy)
		require.Contains(t, strings.Join(r.Notes, "\n"), "kernelbox was stopped with --on-stop close", "policy %s", policy)
		require.NoError(t, e.Close())
	}
}

// Bad bounds are refused at New with the flag named, never replaced in silence.
func TestDurableBoundsRefused(t *testing.T) {
	t.Parallel()
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(t.TempDir(), "ws")})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	for _, tc := range []struct {
		mod  func(*executor.Options)
		flag string
	}{
		{func(o *executor.Options) { o.MaxHibernated = -1 }, "--max-hibernated"},
		{func(o *executor.Options) { o.SnapshotTimeout = -time.Second }, "--snapshot-timeout"},
		{func(o *executor.Options) { o.RestoreTimeout = -time.Second }, "RestoreTimeout"},
	} {
		o := executor.Options{Workspace: ws}
		tc.mod(&o)
		_, err := executor.New(o)
		require.ErrorContains(t, err, tc.flag)
	}
}
