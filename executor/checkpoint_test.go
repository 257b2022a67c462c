package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// The after-call checkpoint tests run on the local backend (here: a kill, a restart
// after an ignored interrupt, a skipped checkpoint, a reset) and on docker (an OOM
// kill).

func checkpointPath(e *env, id string) string {
	return filepath.Join(e.WS.Root(), "sessions", id, executor.CheckpointFile)
}

// awaitCheckpoint waits until session id's last checkpoint is the one after call
// n: it is taken after the call's result is delivered.
func awaitCheckpoint(t *testing.T, e *env, id string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		info, err := e.Session(id)
		return err == nil && info.Checkpoint != nil && info.Checkpoint.AfterCall == n
	}, time.Minute, 10*time.Millisecond, "the checkpoint after call %d", n)
}

// requireRestored checks that r ran on a new kernel with the namespace of the
// checkpoint taken after call afterCall, nothing lost since.
func requireRestored(t *testing.T, r *api.Result, afterCall int) {
	t.Helper()
	require.Equal(t, api.StatusOK, r.Status, "%+v %q", r.Error, r.Notes)
	require.NotNil(t, r.StateRestored, "notes %q", r.Notes)
	require.Equal(t, "checkpoint", r.StateRestored.From)
	require.Equal(t, afterCall, r.StateRestored.AfterCall, "notes %q", r.Notes)
	require.False(t, r.StateRestored.Taken.IsZero())
	require.False(t, r.StateLost, "nothing is lost: the checkpoint is of the last call; notes %q", r.Notes)
	require.Contains(t, strings.Join(r.Notes, "\n"), "the kernel was replaced")
	require.Contains(t, strings.Join(r.Notes, "\n"), "state restored from the checkpoint taken after call")
}

func TestLocalCheckpointAfterCall(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	e := newOwnEnv(t, func(o *executor.Options) {
		o.Checkpoint = executor.CheckpointAfterCall
		o.SnapshotMaxBytes = 4 << 20
		o.InterruptGrace = 500 * time.Millisecond
	})
	ctx := context.Background()
	const id = "ck"

	// Call 1 builds state; call 2 raises after changing it: both leave the
	// namespace whole, so both are checkpointed.
	r := e.run(t, id, "import pandas as pd\ndf = pd.DataFrame({'a': range(100)})\nx = 41\nf = lambda v: v + 1")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	r = e.run(t, id, "y = 'set before the error'\n1/0")
	require.Equal(t, api.StatusError, r.Status)
	_, err := os.Stat(checkpointPath(e, id))
	require.NoError(t, err, "a checkpoint is on disk once the call is answered and the next one ran")
	root := e.Backend.ServerPID() // the server starts with the first kernel
	awaitCheckpoint(t, e, id, 2)

	// A kernel killed between calls: the next call finds the state of call 2.
	killKernel(t, e, id, root)
	r = e.run(t, id, "print(f(x), y, int(df.a.sum()))")
	requireRestored(t, r, 2)
	require.Equal(t, "42 set before the error 4950\n", r.Stdout)
	t.Logf("after a kill: notes %q", r.Notes)

	// A kernel restarted after it ignored the interrupt of a timed-out call: that
	// call says its state is lost, the next one restores the checkpoint of call 3.
	r, err = e.Execute(ctx, api.Request{SessionID: id, Timeout: time.Second,
		Code: "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nz = 1\ntime.sleep(60)"})
	require.NoError(t, err)
	require.Equal(t, api.StatusTimeout, r.Status)
	require.True(t, r.StateLost)
	r = e.run(t, id, "print(x, 'z' in dir())")
	requireRestored(t, r, 3)
	require.Equal(t, "41 False\n", r.Stdout, "the timed-out call's own changes are not in it")

	// Back-to-back calls: the second waits for the first's checkpoint.
	t0 := time.Now()
	e.run(t, id, "x")
	one := time.Since(t0)
	t0 = time.Now()
	e.run(t, id, "x")
	t.Logf("a trivial call right after another took %s (the first %s), with the checkpoint of a small namespace between them", time.Since(t0).Round(time.Millisecond), one.Round(time.Millisecond))

	// Over the snapshot limit: the checkpoint is skipped and the next result says
	// so; a death then restores the older checkpoint and says what is lost.
	r = e.run(t, id, "big = bytes(8 << 20)\nx = 43")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	r = e.run(t, id, "x")
	require.Equal(t, "43", r.Result)
	notes := strings.Join(r.Notes, "\n")
	require.Contains(t, notes, "the checkpoint after call 8 was not taken")
	require.Contains(t, notes, "a kernel death would restore the one taken after call 7")
	r = e.run(t, id, "del big")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	awaitCheckpoint(t, e, id, 10)
	killKernel(t, e, id, root)
	r = e.run(t, id, "x")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.NotNil(t, r.StateRestored)
	require.Equal(t, 10, r.StateRestored.AfterCall, "the checkpoint after the del fits again: %q", r.Notes)
	require.Equal(t, "43", r.Result)

	// A reset asks for a fresh interpreter: the checkpoint is dropped, and a
	// death after it restores nothing.
	err = e.ResetSession(ctx, id)
	require.NoError(t, err)
	_, err = os.Stat(checkpointPath(e, id))
	require.ErrorIs(t, err, os.ErrNotExist, "a reset drops the checkpoint")
	killKernel(t, e, id, root)
	r = e.run(t, id, "print('x' in dir())")
	require.Equal(t, "False\n", r.Stdout)
	require.Nil(t, r.StateRestored)
	require.True(t, r.StateLost)

	// Closed: the checkpoint goes with the session.
	require.NoError(t, e.CloseSession(ctx, id))
	_, err = os.Stat(checkpointPath(e, id))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// An R session is told once that it is not checkpointed.
func TestLocalCheckpointRSession(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Jupyter(t)
	testenv.RKernel(t)
	e := newEnv(t, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "r", Kernel: "ir", Checkpoint: executor.CheckpointAfterCall}}
	})
	ctx := context.Background()
	run := func(code string) *api.Result {
		r, err := e.Execute(ctx, api.Request{SessionID: "ckr", Template: "r", Code: code})
		require.NoError(t, err)
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		return r
	}
	run("x <- 1")
	r := run("x")
	require.Contains(t, strings.Join(r.Notes, "\n"), "checkpoints are off for this session")
	r = run("x")
	require.NotContains(t, strings.Join(r.Notes, "\n"), "checkpoints are off", "told once")
}

// A docker kernel OOM-killed at its memory limit comes back with the namespace
// of its last checkpoint.
func TestDockerCheckpointAfterOOM(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newDillDockerEnvWith(t, testexec.Real{Memory: 256 << 20}, func(o *executor.Options) {
		o.Checkpoint = executor.CheckpointAfterCall
	})
	const id = "dck-oom"
	r := e.run(t, id, "import numpy as np\narr = np.arange(1000)\nx = 41")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	r = e.run(t, id, "b = bytearray(400 << 20)\nb[::4096] = b'x' * len(b[::4096])")
	require.Equal(t, api.StatusKernelDied, r.Status, "%+v", r.Error)
	require.Contains(t, r.Error.Evalue, "OOM")
	require.True(t, r.StateLost)
	r = e.run(t, id, "print(x + 1, int(arr.sum()), 'b' in dir())")
	requireRestored(t, r, 1)
	require.Equal(t, "42 499500 False\n", r.Stdout)
	t.Logf("after the OOM kill: notes %q", r.Notes)
}

// A checkpoint past its time is interrupted in the kernel and skipped: the next
// call runs, says so, and no partial checkpoint file is left.
func TestLocalCheckpointTimeout(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	e := newEnv(t, func(o *executor.Options) {
		o.Checkpoint = executor.CheckpointAfterCall
		o.CheckpointTimeout = 200 * time.Millisecond
	})
	const id = "ck-slow"
	// Millions of small objects: far more than 200 ms to pickle.
	r := e.run(t, id, "big = [str(i) * 3 for i in range(4_000_000)]\nx = 1")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	r = e.run(t, id, "x + 1")
	require.Equal(t, api.StatusOK, r.Status, "%+v %q", r.Error, r.Notes)
	require.Equal(t, "2", r.Result)
	notes := strings.Join(r.Notes, "\n")
	require.Contains(t, notes, "the checkpoint after call 1 was not taken (saving the namespace was stopped after ")
	require.Contains(t, notes, ", over 200ms (the checkpoint timeout); the kernel was interrupted and keeps its namespace)")
	require.NotContains(t, notes, "arrived after earlier calls had ended", "the interrupted save's output is not this call's")
	left, err := filepath.Glob(checkpointPath(e, id) + "*")
	require.NoError(t, err)
	require.Empty(t, left, "no checkpoint, whole or partial, is on disk")
	t.Logf("notes: %q", r.Notes)
}
