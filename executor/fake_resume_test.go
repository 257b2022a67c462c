package executor_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/workspace"
)

// newFakeResumeEnv is a fake executor whose sessions can hibernate, with a template
// "pooled" of one warm kernel, and session id hibernated on it with x set and a
// file in outputs/. It returns the warm placement waiting in the pool.
func newFakeResumeEnv(t *testing.T, id string) (*env, *fakeBackend, *fakePlacement) {
	t.Helper()
	e, b := newFakeEnv(t, func(b *fakeBackend) { b.dirs = true }, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "pooled", Warm: 1}}
	})
	poolReady := func() bool { return e.WarmReadyOf("pooled") == 1 }
	require.Eventually(t, poolReady, 10*time.Second, 5*time.Millisecond)
	r, err := e.Execute(context.Background(), api.Request{SessionID: id, Template: "pooled", Code: "set x 41"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.NoError(t, os.WriteFile(filepath.Join(e.WS.Root(), "sessions", id, "outputs", "kept.txt"), []byte("kept"), 0o644))
	require.Eventually(t, poolReady, 10*time.Second, 5*time.Millisecond, "the pool refills")
	info, err := e.Hibernate(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, api.StateHibernated, info.State)
	var ready *fakePlacement
	for _, p := range b.placements() {
		if p.spec.Warm && !p.isClosed() && p.srv.Kernel(info.KernelID) == nil {
			ready = p // the last warm one still running: the pool's
		}
	}
	require.NotNil(t, ready)
	return e, b, ready
}

// A hibernated session's next call takes the pool's ready kernel (the backend
// starts no kernel for it), whose directory gets the session's files, and the
// snapshot is restored in it.
func TestFakeResumeTakesWarmKernel(t *testing.T) {
	e, b, ready := newFakeResumeEnv(t, "sleeper")
	opened := len(b.placements())

	r, err := e.Execute(context.Background(), api.Request{SessionID: "sleeper", Code: "get x"})
	require.NoError(t, err)
	require.Equal(t, "41", r.Result, "%+v %v", r.Error, r.Notes)
	require.NotNil(t, r.StateRestored, "%v", r.Notes)
	require.Equal(t, "hibernation", r.StateRestored.From)
	require.False(t, r.StateLost, "%v", r.Notes)
	require.Empty(t, r.Artifacts, "the earlier incarnation's outputs are not this call's")
	info, err := e.Session("sleeper")
	require.NoError(t, err)
	require.NotNil(t, ready.srv.Kernel(info.KernelID), "the session runs on the kernel that was warm")
	for _, p := range b.placements()[opened:] {
		require.True(t, p.spec.Warm, "the backend started a kernel for the resume: %+v", p.spec)
	}
	dir := filepath.Join(e.WS.Root(), "sessions", "sleeper")
	require.Equal(t, "kept", readFileT(t, filepath.Join(dir, "outputs", "kept.txt")))
	_, err = os.Stat(filepath.Join(dir, executor.SnapshotFile))
	require.ErrorIs(t, err, os.ErrNotExist, "a restored snapshot is removed")
	_, err = os.Stat(ready.spec.Dir)
	require.ErrorIs(t, err, os.ErrNotExist, "the warm directory is the session's now")
}

// When the files cannot move into the warm directory (an entry of the same name in
// both), the resume starts a kernel of its own and the warm one stays in the pool.
func TestFakeResumeFallsBackCold(t *testing.T) {
	e, b, ready := newFakeResumeEnv(t, "sleeper")
	dir := filepath.Join(e.WS.Root(), "sessions", "sleeper")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "clash"), []byte("session's"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ready.spec.Dir, "clash"), []byte("warm's"), 0o644))
	opened := len(b.placements())

	r, err := e.Execute(context.Background(), api.Request{SessionID: "sleeper", Code: "get x"})
	require.NoError(t, err)
	require.Equal(t, "41", r.Result, "%+v %v", r.Error, r.Notes)
	require.NotNil(t, r.StateRestored, "%v", r.Notes)
	info, err := e.Session("sleeper")
	require.NoError(t, err)
	require.Nil(t, ready.srv.Kernel(info.KernelID), "not the warm kernel")
	require.Len(t, b.placements(), opened+1, "one cold start")
	require.False(t, b.placements()[opened].spec.Warm)
	require.Equal(t, 1, e.WarmReadyOf("pooled"), "the warm kernel is still in the pool")
	require.False(t, ready.isClosed())
	require.Equal(t, "session's", readFileT(t, filepath.Join(dir, "clash")))
	require.Equal(t, "warm's", readFileT(t, filepath.Join(ready.spec.Dir, "clash")))
	require.Equal(t, "kept", readFileT(t, filepath.Join(dir, "outputs", "kept.txt")))
}

// When the files cannot all be put back after a failed move into the warm
// directory (workspace.ErrStranded), the warm kernel is stopped rather than given
// back to the pool, its directory (which holds the stranded files) is kept, and the
// session starts a kernel of its own, on which its call runs. The pool refills and
// serves the next session.
func TestFakeResumeStranded(t *testing.T) {
	e, b, ready := newFakeResumeEnv(t, "sleeper")
	dir := filepath.Join(e.WS.Root(), "sessions", "sleeper")
	var adopts atomic.Int32
	executor.SetAdoptFiles(e.Executor, func(warm *workspace.Session, id string) (*workspace.Session, error) {
		adopts.Add(1)
		// As a failed undo leaves it: one of the session's files in the warm directory.
		if err := os.Rename(filepath.Join(dir, "outputs", "kept.txt"), filepath.Join(warm.Dir(), "kept.txt")); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("adopt the files of %q into warm session %s: %w (%s)", id, warm.ID(), workspace.ErrStranded, warm.Dir())
	})
	cold := func() int {
		n := 0
		for _, p := range b.placements() {
			if !p.spec.Warm {
				n++
			}
		}
		return n
	}
	coldBefore := cold()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	r, err := e.Execute(ctx, api.Request{SessionID: "sleeper", Code: "get x"})
	require.NoError(t, err)
	require.Equal(t, "41", r.Result, "%+v %v", r.Error, r.Notes)
	require.NotNil(t, r.StateRestored, "%v", r.Notes)
	require.Equal(t, "hibernation", r.StateRestored.From)
	require.EqualValues(t, 1, adopts.Load())
	info, err := e.Session("sleeper")
	require.NoError(t, err)
	require.Nil(t, ready.srv.Kernel(info.KernelID), "not the warm kernel")
	require.Equal(t, coldBefore+1, cold(), "one cold start")
	require.True(t, ready.isClosed(), "the warm kernel is stopped")
	require.Equal(t, "kept", readFileT(t, filepath.Join(ready.spec.Dir, "kept.txt")), "the warm directory is kept")

	// The pool refills with another kernel, which the next new session takes.
	require.Eventually(t, func() bool { return e.WarmReadyOf("pooled") == 1 }, 10*time.Second, 5*time.Millisecond)
	r, err = e.Execute(ctx, api.Request{SessionID: "fresh", Template: "pooled", Code: "set y 1"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, coldBefore+1, cold(), "the new session took a warm kernel")
	r, err = e.Execute(ctx, api.Request{SessionID: "sleeper", Code: "get x"})
	require.NoError(t, err)
	require.Equal(t, "41", r.Result, "%+v %v", r.Error, r.Notes)
	require.Equal(t, "kept", readFileT(t, filepath.Join(ready.spec.Dir, "kept.txt")), "the warm directory is still kept")
}

func readFileT(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
