package calls_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/workspace"
)

// validating is a runner that runs nothing and checks requests with a real
// executor's rules.
type validating struct {
	*executor.Executor
	ran *atomic.Int32
}

func (v validating) ExecuteStream(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error) {
	v.ran.Add(1)
	return &api.Result{SessionID: req.SessionID, Status: api.StatusOK}, nil
}

// TestStartInvalid: Start refuses at once what the executor would refuse (its
// own Validate, no Jupyter needed), and registers and runs nothing.
func TestStartInvalid(t *testing.T) {
	t.Parallel()
	ws, err := workspace.New(workspace.Options{Root: t.TempDir()})
	require.NoError(t, err)
	e, err := executor.New(executor.Options{Workspace: ws}) // no backend: nothing can run
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	var ran atomic.Int32
	r := newRegistry(t, validating{e, &ran}, calls.Options{})
	for name, req := range map[string]api.Request{
		"bad session":   {SessionID: "no/slash", Code: "1"},
		"empty session": {SessionID: "", Code: "1"},
		"blank code":    {SessionID: "s", Code: " \n"},
		"huge code":     {SessionID: "s", Code: strings.Repeat("x", 1<<20+1)},
		"NUL in code":   {SessionID: "s", Code: "1\x00"},
		"many inputs":   {SessionID: "s", Code: "1", Inputs: make([]string, 101)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := r.Start(context.Background(), req)
			assert.ErrorIs(t, err, api.ErrInvalidRequest)
		})
	}
	assert.Empty(t, r.List("s"), "a refused call was registered")
	assert.Zero(t, ran.Load(), "a refused call ran")
}

func TestGetNotFoundAndExpired(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, gated(3, nil), calls.Options{MaxCalls: 2})
	var ids []string
	for range 3 {
		c, err := r.Start(context.Background(), api.Request{SessionID: "s", Code: "x"})
		require.NoError(t, err)
		<-c.Done()
		ids = append(ids, c.ID())
	}
	require.Eventually(t, func() bool { _, err := r.Get(ids[0]); return err != nil }, 5*time.Second, 5*time.Millisecond)
	_, err := r.Get(ids[0])
	assert.ErrorIs(t, err, api.ErrCallExpired, "the oldest of 3 finished calls is dropped when 2 are kept")
	for _, id := range ids[1:] {
		c, err := r.Get(id)
		require.NoError(t, err)
		assert.Equal(t, api.StatusOK, c.Info(true, false).Result.Status)
	}
	for _, id := range []string{"nope", "", ids[0] + "0", strings.TrimSuffix(ids[0], "1") + "99", strings.TrimSuffix(ids[0], "1") + "01"} {
		_, err := r.Get(id)
		assert.ErrorIs(t, err, api.ErrNotFound, "id %q", id)
	}
	assert.ErrorIs(t, r.Cancel("nope"), api.ErrNotFound)
}

func TestRetention(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, gated(1, nil), calls.Options{Retention: 50 * time.Millisecond})
	c, err := r.Start(context.Background(), api.Request{SessionID: "s", Code: "x"})
	require.NoError(t, err)
	<-c.Done()
	require.Eventually(t, func() bool {
		_, err := r.Get(c.ID())
		return errors.Is(err, api.ErrCallExpired)
	}, 5*time.Second, 10*time.Millisecond)
	assert.Zero(t, r.TotalLogBytes())
	assert.Zero(t, r.TotalResultBytes(), "a dropped call's Result is no longer counted")
	assert.Empty(t, r.List("s"))
}

// TestTotalLogBytes: past the total bound, the oldest finished logs are emptied,
// their Results kept, and readers told what is gone.
func TestTotalLogBytes(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, gated(1000, nil), calls.Options{MaxLogBytes: 1 << 20, MaxTotalLogBytes: 150 << 10})
	var cs []*calls.Call
	for range 3 {
		c, err := r.Start(context.Background(), api.Request{SessionID: "s", Code: "x"})
		require.NoError(t, err)
		<-c.Done()
		cs = append(cs, c)
	}
	// A call is accounted just after Done: wait until the oldest log was emptied for
	// the third one, not only until the total looks small.
	require.Eventually(t, func() bool {
		return r.TotalLogBytes() <= 150<<10 && cs[0].Info(false, false).LogBytes == 0
	}, 5*time.Second, 5*time.Millisecond)
	first := cs[0].Info(true, false)
	assert.Zero(t, first.LogBytes)
	assert.Equal(t, int64(1001), first.DroppedEvents)
	require.NotNil(t, first.Result)
	assert.Contains(t, first.Result.Stdout, "line 1000\n")
	evs, truncs := readAll(t, cs[0], 0)
	assert.Empty(t, evs)
	require.Len(t, truncs, 1)
	assert.Equal(t, int64(1001), truncs[0].Events)
	last := cs[2].Info(false, false)
	assert.Zero(t, last.DroppedEvents, "the newest log is kept")
}

func TestListNewestFirst(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, gated(1, nil), calls.Options{})
	var ids []string
	for _, s := range []string{"a", "b", "a", "a"} {
		c, err := r.Start(context.Background(), api.Request{SessionID: s, Code: strings.Repeat("é", api.MaxCallCodeBytes)})
		require.NoError(t, err)
		<-c.Done()
		if s == "a" {
			ids = append(ids, c.ID())
		}
	}
	got := r.List("a")
	require.Len(t, got, 3)
	for i, c := range got {
		assert.Equal(t, ids[len(ids)-1-i], c.ID())
		info := c.Info(false, true)
		assert.True(t, info.CodeClipped)
		assert.LessOrEqual(t, len(info.Code), api.MaxCallCodeBytes)
		assert.True(t, strings.HasSuffix(info.Code, "é"), "clipped on a character boundary")
		assert.Nil(t, info.Result)
	}
	assert.Empty(t, r.List("c"))
}

func TestCancel(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	r := newRegistry(t, gated(1, release), calls.Options{})
	c, err := r.Start(context.Background(), api.Request{SessionID: "s", Code: "x"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return c.Info(false, false).State == api.CallRunning }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, r.Cancel(c.ID()))
	res, err := c.Wait(context.Background())
	require.NoError(t, err)
	assert.Equal(t, api.StatusTimeout, res.Status, "the runner reports the interruption")
	info := c.Info(true, false)
	assert.True(t, info.Cancelled)
	assert.Equal(t, api.CallDone, info.State)
	assert.ErrorIs(t, r.Cancel(c.ID()), api.ErrCallFinished)
}

// TestCloseCancelsAndWaits: Close ends running calls and returns after their
// goroutines; later Starts are refused.
func TestCloseCancelsAndWaits(t *testing.T) {
	t.Parallel()
	r := calls.New(gated(1, make(chan struct{})), calls.Options{})
	c, err := r.Start(context.Background(), api.Request{SessionID: "s", Code: "x"})
	require.NoError(t, err)
	require.NoError(t, r.Close())
	select {
	case <-c.Done():
	default:
		t.Fatal("Close returned before the call ended")
	}
	_, err = r.Start(context.Background(), api.Request{SessionID: "s", Code: "x"})
	assert.ErrorIs(t, err, api.ErrClosed)
	require.NoError(t, r.Close())
}

// TestFailedCall: a call the runner could not run ends with its error, in the
// info too.
func TestFailedCall(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, runFunc(func(context.Context, api.Request, func(api.Event)) (*api.Result, error) {
		return nil, api.ErrQueueFull
	}), calls.Options{})
	c, err := r.Start(context.Background(), api.Request{SessionID: "s", Code: "x"})
	require.NoError(t, err)
	_, err = c.Wait(context.Background())
	assert.ErrorIs(t, err, api.ErrQueueFull)
	info := c.Info(true, false)
	require.NotNil(t, info.Error)
	assert.Equal(t, api.CodeQueueFull, info.Error.Code)
	assert.Empty(t, info.Status)
	evs, truncs := readAll(t, c, 0)
	assert.Empty(t, evs)
	assert.Empty(t, truncs)
}

// TestStartWaitsUntilQueued: Start returns once the runner has queued the call
// (api.Queued), not before, so that what its client sends next is ordered after
// it; a call that ends without being queued (refused by its runner) returns at
// once too.
func TestStartWaitsUntilQueued(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	r := calls.New(queueAfter{delay: 300 * time.Millisecond, release: release}, calls.Options{})
	t.Cleanup(func() { close(release); _ = r.Close() })
	t0 := time.Now()
	c, err := r.Start(context.Background(), api.Request{SessionID: "s", Code: "1"})
	require.NoError(t, err)
	took := time.Since(t0)
	assert.GreaterOrEqual(t, took, 300*time.Millisecond, "Start returned before the call was queued")
	assert.Less(t, took, 4*time.Second)
	select {
	case <-c.Done():
		t.Fatal("the call ended before it was released")
	default:
	}

	failing := calls.New(queueAfter{fail: true}, calls.Options{})
	t.Cleanup(func() { _ = failing.Close() })
	t0 = time.Now()
	c, err = failing.Start(context.Background(), api.Request{SessionID: "s", Code: "1"})
	require.NoError(t, err)
	assert.Less(t, time.Since(t0), 2*time.Second, "Start waited for a call that ended unqueued")
	<-c.Done()
}

// queueAfter is a runner that queues its call after delay and then holds it until
// release, or fails it at once without queueing it.
type queueAfter struct {
	delay   time.Duration
	release chan struct{}
	fail    bool
}

func (queueAfter) Validate(api.Request) error { return nil }

func (q queueAfter) ExecuteStream(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error) {
	if q.fail {
		return nil, errors.New("refused before the queue")
	}
	time.Sleep(q.delay)
	api.Queued(ctx)
	<-q.release
	return &api.Result{SessionID: req.SessionID, Status: api.StatusOK}, nil
}
