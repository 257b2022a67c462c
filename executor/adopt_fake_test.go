package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/workspace"
)

// reattaching is a fakeBackend whose placements outlive an executor: Detach lets
// go of them, and Reattach gives the next executor what the test put in kept.
type reattaching struct {
	*fakeBackend
	mu       sync.Mutex
	kept     []executor.Reattached
	detached bool
}

var _ executor.Reattacher = (*reattaching)(nil)

func (b *reattaching) Reattach(context.Context) ([]executor.Reattached, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.kept, nil
}

func (b *reattaching) Detach(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.detached = true
	return nil
}

// placementFor returns the (last) placement opened for session id.
func (b *reattaching) placementFor(t *testing.T, id string) *fakePlacement {
	t.Helper()
	var found *fakePlacement
	for _, p := range b.placements() {
		if p.spec.ID == id {
			found = p
		}
	}
	require.NotNil(t, found, "no placement for %s", id)
	return found
}

// newAdoptExec is an executor on b and ws with state in dir.
func newAdoptExec(t *testing.T, b executor.Backend, ws *workspace.Manager, dir string, stop executor.StopPolicy) *executor.Executor {
	t.Helper()
	e, err := executor.New(executor.Options{Backend: b, Workspace: ws, StateDir: dir, OnClose: stop,
		StartTimeout: 10 * time.Second, ShutdownTimeout: 5 * time.Second, InterruptGrace: 300 * time.Millisecond})
	require.NoError(t, err)
	return e
}

// TestAdoptAfterRestart: an executor closed with StopKeep leaves its kernels to
// the next one on the same StateDir: a session whose placement comes back keeps
// its kernel and variables; one whose placement is lost, or that the backend did
// not keep, or whose kept kernel is not the one its record names, is told why
// at its next call; a placement no session claims is closed. A corrupt state
// file adopts nothing.
func TestAdoptAfterRestart(t *testing.T) {
	t.Parallel()
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(t.TempDir(), "ws")})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	dir := filepath.Join(t.TempDir(), "state")
	b := &reattaching{fakeBackend: newFakeBackend(t)}
	t.Cleanup(func() { _ = b.fakeBackend.Close(context.Background()) })

	e1 := newAdoptExec(t, b, ws, dir, executor.StopKeep)
	ctx := context.Background()
	var want string
	for _, id := range []string{"s1", "s2", "s3"} {
		_, err := e1.Execute(ctx, api.Request{SessionID: id, Code: "set x " + id})
		require.NoError(t, err)
		r, err := e1.Execute(ctx, api.Request{SessionID: id, Code: "get x"})
		require.NoError(t, err)
		if id == "s1" {
			want = r.Result
		}
	}
	require.NotEmpty(t, want)
	info, err := e1.Session("s1")
	require.NoError(t, err)
	require.NoError(t, e1.Close())
	require.True(t, b.detached, "StopKeep detaches the backend")
	p1, p2, p3 := b.placementFor(t, "s1"), b.placementFor(t, "s2"), b.placementFor(t, "s3")
	require.False(t, p1.isClosed(), "a kept kernel's placement stays open")
	fi, err := os.Stat(filepath.Join(dir, "sessions.json"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	b.kept = []executor.Reattached{
		{Session: "s1", Placement: p1},
		{Session: "s2", Lost: "its container was removed by hand"},
		{Session: "ghost", Placement: p2}, // no session of the state claims it
		// The backend recognised another kernel than the one s3's record names.
		{Session: "s3", Placement: p3, KernelID: "another-kernel"},
	}
	e2 := newAdoptExec(t, b, ws, dir, executor.StopClose)
	r, err := e2.Execute(ctx, api.Request{SessionID: "s1", Code: "get x"})
	require.NoError(t, err)
	assert.Equal(t, want, r.Result, "s1 keeps its variable: %v", r.Notes)
	assert.False(t, r.StateLost, "%v", r.Notes)
	got, err := e2.Session("s1")
	require.NoError(t, err)
	assert.Equal(t, info.KernelID, got.KernelID, "the same kernel")
	assert.Equal(t, info.Created.UnixNano(), got.Created.UnixNano(), "created when it was")
	for id, why := range map[string]string{"s2": "removed by hand", "s3": "the backend kept kernel another-kernel for the session, whose record names kernel"} {
		r, err := e2.Execute(ctx, api.Request{SessionID: id, Code: "get x"})
		require.NoError(t, err)
		assert.True(t, r.StateLost, id)
		assert.Contains(t, strings.Join(r.Notes, "\n"), why, id)
	}
	assert.Eventually(t, p2.isClosed, 5*time.Second, 20*time.Millisecond, "an unclaimed placement is closed")
	assert.True(t, p3.isClosed(), "a placement whose kernel is not the session's is closed")
	require.NoError(t, e2.Close())

	// A corrupt state file: nothing is adopted blindly, it is set aside.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sessions.json"), []byte("{not json"), 0o600))
	b2 := &reattaching{fakeBackend: newFakeBackend(t)}
	t.Cleanup(func() { _ = b2.fakeBackend.Close(context.Background()) })
	e3 := newAdoptExec(t, b2, ws, dir, executor.StopClose)
	_, err = os.Stat(filepath.Join(dir, "sessions.json.bad"))
	assert.NoError(t, err, "the corrupt file is set aside")
	assert.Empty(t, e3.Sessions())
	require.NoError(t, e3.Close())
}
