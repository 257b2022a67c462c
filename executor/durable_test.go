package executor_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// The hibernation tests run the same scenarios on the local backend (here) and on
// docker (durable_docker_test.go).

// richState builds a namespace with each kind of value the issue names.
const richState = `import numpy as np, pandas as pd
import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
df = pd.DataFrame({'a': np.arange(1000), 'b': np.random.default_rng(1).random(1000), 's': ['r%d' % i for i in range(1000)]})
def f(n):
    return n * 2 + len(df)
lam = lambda v: v ** 2
class Acc:
    def __init__(self):
        self.a, self.b = 3, [1, 2]
    def total(self):
        return self.a + sum(self.b)
obj = Acc()
fig, ax = plt.subplots()
ax.plot([1, 2, 3], [4, 5, 6])
gen = (i for i in range(10))
x = 41
open('outputs/keep.txt', 'w').write('kept')
`

// digest prints one line that is equal only when every restorable value is equal
// by content.
const digest = `import hashlib, json
print(json.dumps([
    hashlib.sha256(pd.util.hash_pandas_object(df, index=True).values.tobytes()).hexdigest(),
    list(df.columns), f(3), lam(4), [obj.a, obj.b, type(obj).__name__, obj.total()],
    [len(fig.axes), [float(v) for v in fig.axes[0].lines[0].get_ydata()]], x, np.__name__]))`

func snapshotPath(e *env, id string) string {
	return filepath.Join(e.WS.Root(), "sessions", id, executor.SnapshotFile)
}

// hibernateResume: values equal by content after hibernate and resume, the
// generator named as not restored, the files unchanged.
func hibernateResume(t *testing.T, e *env, id string) {
	ctx := context.Background()
	r := e.run(t, id, richState)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	before := e.run(t, id, digest)
	require.Equal(t, api.StatusOK, before.Status, "%+v", before.Error)

	t0 := time.Now()
	info, err := e.Hibernate(ctx, id)
	require.NoError(t, err)
	t.Logf("hibernate took %s (snapshot %d bytes, in the kernel %d ms)", time.Since(t0).Round(time.Millisecond), info.Snapshot.Bytes, info.Snapshot.TookMS)
	require.Equal(t, api.StateHibernated, info.State)
	require.Empty(t, info.KernelID)
	for _, n := range []string{"df", "f", "lam", "obj", "fig", "x", "Acc", "ax"} {
		require.Contains(t, info.Snapshot.Names, n)
	}
	require.Equal(t, "numpy", info.Snapshot.Modules["np"])
	require.Contains(t, info.Snapshot.Skipped, "gen")
	require.NotContains(t, info.Snapshot.Names, "In")
	fi, err := os.Stat(snapshotPath(e, id))
	require.NoError(t, err)
	require.Equal(t, info.Snapshot.Bytes, fi.Size())
	listed, err := e.Session(id)
	require.NoError(t, err)
	require.Equal(t, api.StateHibernated, listed.State)

	t0 = time.Now()
	after := e.run(t, id, digest)
	t.Logf("first call after hibernation (kernel start + restore + call): %s", time.Since(t0).Round(time.Millisecond))
	require.Equal(t, api.StatusOK, after.Status, "%+v %v", after.Error, after.Notes)
	require.False(t, after.StateLost, "%v", after.Notes)
	require.NotNil(t, after.StateRestored, "%v", after.Notes)
	require.Equal(t, "hibernation", after.StateRestored.From)
	require.Contains(t, after.StateRestored.NotRestored, "gen")
	require.Contains(t, after.StateRestored.NotRestored["gen"], "generator")
	require.Equal(t, before.Stdout, after.Stdout)
	r = e.run(t, id, "gen")
	require.Equal(t, "NameError", r.Error.Ename)
	r = e.run(t, id, "open('outputs/keep.txt').read()")
	require.Equal(t, "'kept'", r.Result)
	require.Nil(t, r.StateRestored, "told once")
	_, err = os.Stat(snapshotPath(e, id))
	require.ErrorIs(t, err, os.ErrNotExist, "a restored snapshot is removed")
}

// damagedSnapshot: a truncated, corrupted or other-format snapshot is never
// loaded; the call runs in an empty kernel and says why.
func damagedSnapshot(t *testing.T, e *env, id string) {
	cases := []struct {
		name, want string
		damage     func(b []byte) []byte
	}{
		{"truncated", "truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"corrupted", "corrupted", func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b }},
		{"other-format", "another kernelbox snapshot format", func(b []byte) []byte { b[6] = '9'; return b }},
		{"missing", "missing", nil},
	}
	for _, c := range cases {
		sid := id + "-" + c.name
		r := e.run(t, sid, "x = 41")
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		_, err := e.Hibernate(context.Background(), sid)
		require.NoError(t, err)
		p := snapshotPath(e, sid)
		if c.damage == nil {
			require.NoError(t, os.Remove(p))
		} else {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, c.damage(b), 0o644))
		}
		r = e.run(t, sid, "x")
		require.Equal(t, "NameError", r.Error.Ename, c.name)
		require.True(t, r.StateLost, c.name)
		require.Nil(t, r.StateRestored)
		require.Contains(t, strings.Join(r.Notes, "\n"), c.want, c.name)
		require.Equal(t, "2", e.run(t, sid, "1+1").Result, "the session goes on")
	}
}

// hostileReduce: an object whose __reduce__ runs code at load runs it only in the
// session's kernel: the marker it writes names the kernel's pid, not this process's.
func hostileReduce(t *testing.T, e *env, id string) {
	r := e.run(t, id, `class Evil:
    def __reduce__(self):
        return (exec, ("import os; open(os.path.join(os.getcwd(), 'evil-ran'), 'w').write(str(os.getpid()))",))
ev = Evil()`)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	_, err := e.Hibernate(context.Background(), id)
	require.NoError(t, err)
	marker := filepath.Join(e.WS.Root(), "sessions", id, "evil-ran")
	_, err = os.Stat(marker)
	require.ErrorIs(t, err, os.ErrNotExist, "nothing ran at dump time, nor in this process")
	r = e.run(t, id, "import os; os.getpid()")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	b, err := os.ReadFile(marker)
	require.NoError(t, err, "the hostile load ran in the kernel")
	require.Equal(t, r.Result, string(b), "it ran in the session's kernel process")
	require.NotEqual(t, strconv.Itoa(os.Getpid()), string(b))
}

// hibernateEdges: a second resume, resume racing a close, hibernate during a
// running call, a namespace over the limit.
func hibernateEdges(t *testing.T, e *env, id string) {
	ctx := context.Background()
	// Hibernate waits for the running call, then saves what it made.
	done := make(chan *api.Result, 1)
	go func() {
		r, _ := e.Execute(ctx, api.Request{SessionID: id, Code: "import time; time.sleep(1.5); y = 5"})
		done <- r
	}()
	require.Eventually(t, func() bool { i, err := e.Session(id); return err == nil && i.State == api.StateBusy }, time.Minute, 20*time.Millisecond)
	info, err := e.Hibernate(ctx, id)
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, (<-done).Status)
	require.Contains(t, info.Snapshot.Names, "y")

	first, err := e.Resume(ctx, id)
	require.NoError(t, err)
	require.True(t, first.Resumed)
	require.NotNil(t, first.StateRestored)
	require.Contains(t, first.StateRestored.Restored, "y")
	require.Equal(t, api.StateIdle, first.Session.State)
	second, err := e.Resume(ctx, id)
	require.NoError(t, err)
	require.False(t, second.Resumed, "nothing to resume")
	r := e.run(t, id, "y")
	require.Equal(t, "5", r.Result)
	require.Nil(t, r.StateRestored, "an explicit resume told it already")

	// Resume racing a close: either wins; nothing hangs; the id is free after.
	_, err = e.Hibernate(ctx, id)
	require.NoError(t, err)
	res := make(chan error, 1)
	go func() { _, err := e.Resume(ctx, id); res <- err }()
	require.NoError(t, e.CloseSession(ctx, id))
	select {
	case err := <-res:
		if err != nil {
			require.True(t, errors.Is(err, api.ErrSessionClosed) || errors.Is(err, api.ErrNotFound), "%v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("resume did not return after the close")
	}
	_, err = e.Session(id)
	require.ErrorIs(t, err, api.ErrNotFound)
	require.Equal(t, "NameError", e.run(t, id, "y").Error.Ename)
}

// tooBig: a namespace over the snapshot limit is refused whole; the session lives.
func tooBig(t *testing.T, e *env, id string) {
	r := e.run(t, id, "import numpy as np; small = 1; big = np.ones(4 << 20)")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	info, err := e.Hibernate(context.Background(), id)
	require.ErrorIs(t, err, api.ErrSnapshotTooLarge)
	require.Contains(t, err.Error(), "big")
	require.Equal(t, api.StateIdle, info.State)
	_, serr := os.Stat(snapshotPath(e, id))
	require.ErrorIs(t, serr, os.ErrNotExist)
	require.Equal(t, "4194304", e.run(t, id, "len(big)").Result)
}

// idleHibernates: past its HibernateAfter an idle session hibernates, not closes.
func idleHibernates(t *testing.T, e *env, id string) {
	require.Equal(t, api.StatusOK, e.run(t, id, "x = 41").Status)
	t0 := time.Now()
	require.Eventually(t, func() bool { i, err := e.Session(id); return err == nil && i.State == api.StateHibernated }, 2*time.Minute, 100*time.Millisecond)
	t.Logf("hibernated %s after the call (HibernateAfter 2s)", time.Since(t0).Round(time.Millisecond))
	r := e.run(t, id, "x + 1")
	require.Equal(t, "42", r.Result, "%v", r.Notes)
	require.NotNil(t, r.StateRestored)
}

func TestLocalHibernateResume(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	e := newEnv(t, nil)
	hibernateResume(t, e, "hib")
}

func TestLocalHibernateDamagedSnapshot(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	damagedSnapshot(t, newEnv(t, nil), "dmg")
}

func TestLocalHibernateHostileObject(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	hostileReduce(t, newEnv(t, nil), "evil")
}

func TestLocalHibernateEdges(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	hibernateEdges(t, newEnv(t, nil), "edge")
}

func TestLocalHibernateTooBig(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	tooBig(t, newEnv(t, func(o *executor.Options) { o.SnapshotMaxBytes = 8 << 20 }), "big")
}

func TestLocalIdleHibernates(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	idleHibernates(t, newEnv(t, func(o *executor.Options) { o.HibernateAfter = 2 * time.Second }), "idle")
}

// forkDiverges: a fork restores the namespace and files in a new session; the two
// then diverge, and the original is untouched. A hibernated original stays so.
func forkDiverges(t *testing.T, e *env, id string) {
	ctx := context.Background()
	r := e.run(t, id, "x = [1, 2]\nsq = lambda v: v * v\nopen('outputs/a.txt', 'w').write('a')")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	t0 := time.Now()
	res, err := e.Fork(ctx, id, id+"-b")
	require.NoError(t, err)
	t.Logf("fork of a live session took %s", time.Since(t0).Round(time.Millisecond))
	require.NotNil(t, res.StateRestored)
	require.Equal(t, "fork:"+id, res.StateRestored.From)
	require.Contains(t, res.StateRestored.Restored, "x")
	r = e.run(t, id+"-b", "x.append(3); open('outputs/a.txt', 'w').write('b'); (x, sq(4))")
	require.Equal(t, "([1, 2, 3], 16)", r.Result, "%+v %v", r.Error, r.Notes)
	require.Equal(t, "[1, 2]", e.run(t, id, "x").Result)
	require.Equal(t, "'a'", e.run(t, id, "open('outputs/a.txt').read()").Result)
	_, err = os.Stat(snapshotPath(e, id))
	require.ErrorIs(t, err, os.ErrNotExist, "the original keeps no snapshot")
	i, err := e.Session(id)
	require.NoError(t, err)
	require.Equal(t, api.StateIdle, i.State)

	_, err = e.Fork(ctx, id, id+"-b")
	require.ErrorIs(t, err, api.ErrInvalidRequest, "fork into a live session")

	_, err = e.Hibernate(ctx, id)
	require.NoError(t, err)
	res, err = e.Fork(ctx, id, id+"-c")
	require.NoError(t, err)
	require.Contains(t, res.StateRestored.Restored, "x")
	require.Equal(t, "[1, 2]", e.run(t, id+"-c", "x").Result)
	i, err = e.Session(id)
	require.NoError(t, err)
	require.Equal(t, api.StateHibernated, i.State, "a hibernated original stays hibernated")
	require.Equal(t, "[1, 2]", e.run(t, id, "x").Result)
}

func TestLocalForkDiverges(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	forkDiverges(t, newEnv(t, nil), "fk")
}

func TestLocalHibernateTimes(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	hibernateTimes(t, newEnv(t, nil), "time")
}

// R sessions do not hibernate: an explicit hibernate says so and leaves the session
// live; an idle one is closed as before, and its next call is told why.
func TestLocalRSessionDoesNotHibernate(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Jupyter(t)
	testenv.RKernel(t)
	e := newEnv(t, func(o *executor.Options) {
		o.Kernel, o.HibernateAfter, o.IdleTimeout = "ir", 2*time.Second, 4*time.Second
	})
	ctx := context.Background()
	r := e.run(t, "r", "x <- 41")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	_, err := e.Hibernate(ctx, "r")
	require.ErrorIs(t, err, api.ErrCannotHibernate)
	require.Contains(t, err.Error(), "only Python sessions hibernate")
	require.Equal(t, "[1] 42", strings.TrimSpace(e.run(t, "r", "print(x + 1)").Stdout), "still live")
	require.Eventually(t, func() bool { _, err := e.Session("r"); return errors.Is(err, api.ErrNotFound) }, 2*time.Minute, 100*time.Millisecond)
	r = e.run(t, "r", "exists('x')")
	require.True(t, r.StateLost)
	require.Contains(t, strings.Join(r.Notes, "\n"), "could not hibernate")
	require.Contains(t, strings.Join(r.Notes, "\n"), "only Python sessions hibernate")
}

// A hibernated session leaves its place among MaxSessions to another, and wakes only
// when there is room again.
func TestLocalHibernatedFreesSlot(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	e := newEnv(t, func(o *executor.Options) { o.MaxSessions = 1 })
	ctx := context.Background()
	require.Equal(t, api.StatusOK, e.run(t, "a", "x = 1").Status)
	_, err := e.Execute(ctx, api.Request{SessionID: "b", Code: "1"})
	require.ErrorIs(t, err, api.ErrTooManySessions)
	_, err = e.Hibernate(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "2", e.run(t, "b", "1 + 1").Result, "a's place is b's now")
	_, err = e.Execute(ctx, api.Request{SessionID: "a", Code: "x"})
	require.ErrorIs(t, err, api.ErrTooManySessions)
	i, err := e.Session("a")
	require.NoError(t, err)
	require.Equal(t, "hibernated", string(i.State), "it stays hibernated")
	require.NoError(t, e.CloseSession(ctx, "b"))
	r := e.run(t, "a", "x")
	require.Equal(t, "1", r.Result, "%v", r.Notes)
	require.NotNil(t, r.StateRestored)
}
