package executor_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// A hibernated session's resume takes a warm kernel of its template when the pool
// has one (issue 34): the session's files move into the warm kernel's directory,
// which the kernel works in, and the snapshot is restored there. The tests run on
// local and docker, with the template "pooled" (one warm kernel).

// runIn runs code in session id of template tmpl.
func (e *env) runIn(t testing.TB, id, tmpl, code string) *api.Result {
	t.Helper()
	r, err := e.Execute(context.Background(), api.Request{SessionID: id, Template: tmpl, Code: code, Timeout: 5 * time.Minute})
	require.NoError(t, err)
	return r
}

// waitWarm waits until template tmpl's pool holds n kernels.
func waitWarm(t testing.TB, e *env, tmpl string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return e.WarmReadyOf(tmpl) == n }, 3*time.Minute, 20*time.Millisecond,
		"template %s's pool does not hold %d kernels", tmpl, n)
}

// inode returns the inode number of path.
func inode(t testing.TB, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Sys().(*syscall.Stat_t).Ino
}

// warmDir returns the name of the one warm directory in sessions/.
func warmDir(t testing.TB, e *env) string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(e.WS.Root(), "sessions"))
	require.NoError(t, err)
	var warm []string
	for _, de := range entries {
		if strings.HasPrefix(de.Name(), ".warm-") {
			warm = append(warm, de.Name())
		}
	}
	require.Len(t, warm, 1, "one warm directory: %v", warm)
	return warm[0]
}

// hibernateWith sets name = value and writes outputs/<name>.txt in session id,
// then hibernates it.
func hibernateWith(t *testing.T, e *env, id, name string, value int) {
	t.Helper()
	r := e.runIn(t, id, "pooled", fmt.Sprintf("%s = %d\nopen('outputs/%s.txt', 'w').write('%d')", name, value, name, value))
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	_, err := e.Hibernate(context.Background(), id)
	require.NoError(t, err)
}

// checkResumed checks a resumed call's result: the variable back, the file there,
// state_restored reported, the earlier outputs not reported as artifacts. It
// returns the inode of the kernel's working directory.
func checkResumed(t *testing.T, e *env, id, name string, value int) uint64 {
	t.Helper()
	r := e.runIn(t, id, "pooled", fmt.Sprintf("import os; (%s, open('outputs/%s.txt').read(), os.stat('.').st_ino)", name, name))
	require.Equal(t, api.StatusOK, r.Status, "%+v %v", r.Error, r.Notes)
	require.NotNil(t, r.StateRestored, "%v", r.Notes)
	require.Equal(t, "hibernation", r.StateRestored.From)
	require.Contains(t, r.StateRestored.Restored, name)
	require.False(t, r.StateLost, "%v", r.Notes)
	require.Empty(t, r.Artifacts, "the earlier incarnation's outputs are not this call's")
	prefix := fmt.Sprintf("(%d, '%d', ", value, value)
	require.True(t, strings.HasPrefix(r.Result, prefix), "%s", r.Result)
	ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(r.Result, prefix), ")"), 10, 64)
	require.NoError(t, err, r.Result)
	return ino
}

// warmResume needs an env with the template "pooled" (warm 1) and MaxSessions 2.
// A hibernated session resumes in the pool's ready kernel: the directory the kernel
// works in is the one that was warm (so no kernel was started for it; onWarm checks
// more for a backend, given the warm directory's name). Then, with another session
// holding the pool's kernel and MaxSessions leaving no room to refill, the pool is
// empty and the resume starts a kernel of its own.
func warmResume(t *testing.T, e *env, id string, onWarm func(warm string)) {
	ctx := context.Background()
	waitWarm(t, e, "pooled", 1)
	hibernateWith(t, e, id, "x", 41)
	waitWarm(t, e, "pooled", 1) // refilled after id took the first
	warm := warmDir(t, e)
	warmIno := inode(t, filepath.Join(e.WS.Root(), "sessions", warm))

	require.Equal(t, warmIno, checkResumed(t, e, id, "x", 41), "the resume runs in the warm kernel's directory")
	require.Equal(t, warmIno, inode(t, filepath.Join(e.WS.Root(), "sessions", id)))
	_, err := os.Stat(filepath.Join(e.WS.Root(), "sessions", warm))
	require.ErrorIs(t, err, os.ErrNotExist)
	if onWarm != nil {
		onWarm(warm)
	}

	// The pool refills; another session takes it, and MaxSessions (2) leaves no room
	// for a new one.
	waitWarm(t, e, "pooled", 1)
	require.Equal(t, api.StatusOK, e.runIn(t, id+"-other", "pooled", "1").Status)
	hibernateWith(t, e, id, "y", 7)
	require.Equal(t, 0, e.WarmReadyOf("pooled"))
	before := inode(t, filepath.Join(e.WS.Root(), "sessions", id))
	res, err := e.Resume(ctx, id)
	require.NoError(t, err)
	require.True(t, res.Resumed)
	require.NotNil(t, res.StateRestored)
	require.Contains(t, res.StateRestored.Restored, "y")
	r := e.runIn(t, id, "pooled", "import os; (x, y, open('outputs/x.txt').read(), open('outputs/y.txt').read(), os.stat('.').st_ino)")
	require.Equal(t, fmt.Sprintf("(41, 7, '41', '7', %d)", before), r.Result, "%+v %v", r.Error, r.Notes)
}

func TestLocalResumeTakesWarmKernel(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	e := newEnv(t, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "pooled", Warm: 1}}
		o.MaxSessions = 2
	})
	warmResume(t, e, "wr", nil)
}

func TestDockerResumeTakesWarmKernel(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newDillDockerEnvWith(t, testexec.Real{Memory: 1 << 30}, func(o *executor.Options) {
		o.Templates = loadTemplates(t, `{"templates": [{"name": "pooled", "warm": 1}]}`, dockerCaps)
		o.MaxSessions = 2
		o.StartTimeout = 3 * time.Minute
	})
	var warmLabel string
	warmResume(t, e, "dwr", func(warm string) {
		// The session's container is the warm one (its session label is the warm
		// directory's name), renamed after the session.
		for _, c := range ourContainers(t) {
			if f := strings.Fields(c); len(f) == 2 && f[1] == warm {
				warmLabel = f[1]
				require.True(t, strings.HasPrefix(f[0], "kernelbox-dwr-"), "%s", c)
			}
		}
		require.Equal(t, warm, warmLabel, "no container of the warm directory: %v", ourContainers(t))
	})
}

// resumeTimes measures resuming a 100 MiB namespace with a warm kernel (template
// "pooled", warm 1) and with a cold start (template "cold"), rounds times each,
// and logs them.
func resumeTimes(t *testing.T, e *env, id string, rounds int) {
	ctx := context.Background()
	const build = "import numpy as np; a = np.random.default_rng(0).random(100 * 2**20 // 8)"
	for _, tmpl := range []string{"pooled", "cold"} {
		sid := id + "-" + tmpl
		if tmpl == "pooled" {
			waitWarm(t, e, tmpl, 1)
		}
		r := e.runIn(t, sid, tmpl, build)
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		for i := range rounds {
			_, err := e.Hibernate(ctx, sid)
			require.NoError(t, err)
			if tmpl == "pooled" {
				waitWarm(t, e, tmpl, 1)
			}
			t0 := time.Now()
			res, err := e.Resume(ctx, sid)
			took := time.Since(t0)
			require.NoError(t, err)
			require.NotNil(t, res.StateRestored)
			t.Logf("100 MiB, %s, round %d: resume %s (restore %d ms in the kernel)", tmpl, i+1, took.Round(time.Millisecond), res.StateRestored.TookMS)
			require.Equal(t, fmt.Sprint(100*(1<<20)/8), e.runIn(t, sid, tmpl, "len(a)").Result)
		}
	}
}

func TestLocalResumeTimes(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	e := newEnv(t, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "pooled", Warm: 1}, {Name: "cold"}}
	})
	resumeTimes(t, e, "rt", 3)
}

func TestDockerResumeTimes(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newDillDockerEnvWith(t, testexec.Real{Memory: 1 << 30}, func(o *executor.Options) {
		o.Templates = loadTemplates(t, `{"templates": [{"name": "pooled", "warm": 1}, {"name": "cold"}]}`, dockerCaps)
		o.StartTimeout = 3 * time.Minute
	})
	resumeTimes(t, e, "drt", 3)
}
