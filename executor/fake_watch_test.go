package executor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// A session's watcher sees every call that runs on it, whoever asked: its start
// with the code and source, its events in order, its end with the Result, each
// report of one call with the same number; after stop it sees nothing; when the
// session closes it is told so, last. Watching a session that does not exist fails.
func TestFakeWatch(t *testing.T) {
	t.Parallel()
	e, _ := newFakeEnv(t, nil, nil)
	_, err := e.Watch("nobody", func(executor.Watched) {})
	require.ErrorIs(t, err, api.ErrNotFound)

	r := e.run(t, "w", "set x 1")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	var mu sync.Mutex
	var seen []executor.Watched
	stop, err := e.Watch("w", func(w executor.Watched) {
		mu.Lock()
		seen = append(seen, w)
		mu.Unlock()
	})
	require.NoError(t, err)

	r = e.run(t, "w", "print hello")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	_, err = e.Execute(context.Background(), api.Request{SessionID: "w", Code: "print again", Source: "jupyter"})
	require.NoError(t, err)
	mu.Lock()
	got := append([]executor.Watched(nil), seen...)
	mu.Unlock()
	require.GreaterOrEqual(t, len(got), 6)
	first, second := got[0], got[len(got)-1]
	assert.Equal(t, executor.WatchStart, first.Kind)
	assert.Equal(t, "print hello", first.Code)
	assert.Equal(t, "", first.Source)
	assert.Equal(t, 2, first.ExecutionCount, "the second call of the session")
	assert.Equal(t, executor.WatchEnd, second.Kind)
	assert.Equal(t, "jupyter", second.Source)
	require.NotNil(t, second.Result)
	assert.Equal(t, "again\n", second.Result.Stdout)
	var stdout string
	for _, w := range got {
		if w.Call == first.Call && w.Kind == executor.WatchEvent && w.Event.Type == "stream" {
			stdout += w.Event.Text
		}
		assert.Contains(t, []int64{first.Call, first.Call + 1}, w.Call)
	}
	assert.Equal(t, "hello\n", stdout, "the first call's stream event")

	// After stop nothing more arrives.
	stop()
	r = e.run(t, "w", "print unseen")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	mu.Lock()
	assert.Len(t, seen, len(got))
	mu.Unlock()

	// A watcher learns that the session closed.
	closed := make(chan struct{})
	_, err = e.Watch("w", func(w executor.Watched) {
		if w.Kind == executor.WatchClosed {
			close(closed)
		}
	})
	require.NoError(t, err)
	require.NoError(t, e.CloseSession(context.Background(), "w"))
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher was not told the session closed")
	}
}
