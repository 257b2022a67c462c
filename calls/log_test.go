package calls_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
)

// runFunc is a Runner made of a function.
type runFunc func(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error)

func (f runFunc) ExecuteStream(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error) {
	api.Queued(ctx) // as the executor does once the call is on its session's queue
	return f(ctx, req, onEvent)
}

// Validate accepts every request: these runners test the registry, not request
// shapes (TestStartInvalid checks those with the executor's own rules).
func (runFunc) Validate(api.Request) error { return nil }

// gated is a runner that emits n stream events "line i\n" once release is
// closed (or at once when release is nil) and returns a Result with all of them.
func gated(n int, release <-chan struct{}) runFunc {
	return func(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error) {
		onEvent(api.Event{Type: "status", State: "running"})
		if release != nil {
			select {
			case <-release:
			case <-ctx.Done():
				return &api.Result{SessionID: req.SessionID, Status: api.StatusTimeout}, nil
			}
		}
		var out strings.Builder
		for i := 1; i <= n; i++ {
			line := fmt.Sprintf("line %d\n", i)
			out.WriteString(line)
			onEvent(api.Event{Type: "stream", Name: "stdout", Text: line})
		}
		return &api.Result{SessionID: req.SessionID, Status: api.StatusOK, Stdout: out.String()}, nil
	}
}

func newRegistry(t testing.TB, run calls.Runner, o calls.Options) *calls.Registry {
	t.Helper()
	r := calls.New(run, o)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	return r
}

// readAll follows a call from after to the end and returns what it got.
func readAll(t testing.TB, c *calls.Call, after int64) (events []calls.Event, truncs []api.Truncation) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		b, err := c.Read(ctx, after)
		require.NoError(t, err)
		if b.Truncated != nil {
			truncs = append(truncs, *b.Truncated)
		}
		events = append(events, b.Events...)
		after = b.Last(after)
		if b.Done {
			return events, truncs
		}
	}
}

// checkSeqs asserts events are numbered from, from+1, ... without gaps.
func checkSeqs(t testing.TB, events []calls.Event, from int64) {
	t.Helper()
	for i, ev := range events {
		require.Equal(t, from+int64(i), ev.Seq, "event %d", i)
	}
}

func TestLogConcurrentReaders(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	r := newRegistry(t, gated(5000, release), calls.Options{})
	c, err := r.Start(context.Background(), api.Request{SessionID: "s", Code: "x"})
	require.NoError(t, err)
	var wg sync.WaitGroup
	got := make([][]calls.Event, 8)
	for i := range got {
		wg.Go(func() {
			got[i], _ = readAll(t, c, 0)
		})
	}
	close(release)
	wg.Wait()
	for i, evs := range got {
		require.Len(t, evs, 5001, "reader %d", i)
		checkSeqs(t, evs, 1)
		assert.Equal(t, "line 5000\n", evs[5000].Text)
	}
	res, err := c.Final()
	require.NoError(t, err)
	assert.Equal(t, api.StatusOK, res.Status)
}

func TestLogResumeAfterSeq(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, gated(100, nil), calls.Options{})
	c, err := r.Start(context.Background(), api.Request{SessionID: "s", Code: "x"})
	require.NoError(t, err)
	all, truncs := readAll(t, c, 0)
	require.Empty(t, truncs)
	require.Len(t, all, 101)
	for _, after := range []int64{0, 1, 50, 100, 101} {
		evs, truncs := readAll(t, c, after)
		assert.Empty(t, truncs)
		assert.Len(t, evs, int(101-after), "after %d", after)
		checkSeqs(t, evs, after+1)
	}
}

// TestLogDropAndTruncated fills a small log: a reader from the start is told
// exactly which events (and how many bytes) it missed, then gets the rest; a
// reader resuming inside the dropped range is told its own part.
func TestLogDropAndTruncated(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, gated(1000, nil), calls.Options{MaxLogBytes: 8 << 10})
	c, err := r.Start(context.Background(), api.Request{SessionID: "s", Code: "x"})
	require.NoError(t, err)
	<-c.Done()
	info := c.Info(true, false)
	require.Positive(t, info.DroppedEvents)
	require.LessOrEqual(t, info.LogBytes, int64(8<<10))
	assert.Equal(t, int64(1001), info.Events)

	evs, truncs := readAll(t, c, 0)
	require.Len(t, truncs, 1)
	tr := truncs[0]
	assert.Equal(t, api.Truncation{From: 1, To: info.DroppedEvents, Events: info.DroppedEvents, Bytes: info.DroppedBytes}, tr)
	checkSeqs(t, evs, info.DroppedEvents+1)
	assert.Equal(t, "line 1000\n", evs[len(evs)-1].Text)

	// Resuming after seq 100: missed 101..dropped, and their bytes.
	evs2, truncs2 := readAll(t, c, 100)
	require.Len(t, truncs2, 1)
	assert.Equal(t, int64(101), truncs2[0].From)
	assert.Equal(t, info.DroppedEvents-100, truncs2[0].Events)
	assert.Less(t, truncs2[0].Bytes, info.DroppedBytes)
	assert.Positive(t, truncs2[0].Bytes)
	assert.Equal(t, evs, evs2)

	res, err := c.Final()
	require.NoError(t, err)
	assert.Contains(t, res.Stdout, "line 1\n", "the Result is whole")
	assert.Contains(t, res.Stdout, "line 1000\n")
}

// TestLogSlowReader: a reader that takes its time never holds up the producer;
// it gets every event still held, in order, and a notice for the rest.
func TestLogSlowReader(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, gated(20000, nil), calls.Options{MaxLogBytes: 64 << 10})
	c, err := r.Start(context.Background(), api.Request{SessionID: "s", Code: "x"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var after, seen int64
	for {
		b, err := c.Read(ctx, after)
		require.NoError(t, err)
		if b.Truncated != nil {
			require.Equal(t, after+1, b.Truncated.From, "the notice starts where the reader was")
			seen += b.Truncated.Events
		}
		if len(b.Events) > 0 {
			require.Equal(t, b.Last(after)-int64(len(b.Events))+1, b.Events[0].Seq)
		}
		seen += int64(len(b.Events))
		after = b.Last(after)
		if b.Done {
			break
		}
		time.Sleep(time.Millisecond) // slow
	}
	assert.Equal(t, int64(20001), seen, "every event is either read or reported missed")
	assert.Equal(t, int64(20001), after)
}

// TestLogReaderNeverBlocksProducer: readers waiting on a call (and one that
// never reads again) do not slow its events.
func TestLogReaderNeverBlocksProducer(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, gated(200000, nil), calls.Options{MaxLogBytes: 1 << 20})
	c, err := r.Start(context.Background(), api.Request{SessionID: "s", Code: "x"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	_, err = c.Read(ctx, 0) // one read, then never again
	require.NoError(t, err)
	cancel()
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the call waited for its reader")
	}
}

func TestReadCanceled(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	r := newRegistry(t, gated(1, release), calls.Options{})
	c, err := r.Start(context.Background(), api.Request{SessionID: "s", Code: "x"})
	require.NoError(t, err)
	b, err := c.Read(context.Background(), 0)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = c.Read(ctx, b.Last(0))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	close(release)
	evs, _ := readAll(t, c, b.Last(0))
	checkSeqs(t, evs, 2)
}
