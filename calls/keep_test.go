package calls_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
)

// displaying is a runner whose every call shows one PNG of size bytes of
// base64 data, saved as an artifact, as the executor reports it: the display
// event and the Result share the output's data, and the Result lists the
// artifact. Each call's data is a fresh allocation.
func displaying(size int) runFunc {
	return func(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error) {
		onEvent(api.Event{Type: "status", State: "running"})
		raw := bytes.Repeat([]byte("ABCDEFGH"), (size+2)/8+1)[:size+2]
		raw[0], raw[len(raw)-1] = '"', '"'
		name := "display/cell1-" + req.Code + "-1.png"
		out := api.Output{
			OutputType: "display_data",
			Data:       map[string]json.RawMessage{"image/png": raw, "text/plain": json.RawMessage(`"<Figure>"`)},
			Metadata:   map[string]json.RawMessage{},
			Artifacts:  map[string]string{"image/png": name},
		}
		onEvent(api.Event{Type: "display", Output: &out})
		return &api.Result{
			SessionID: req.SessionID, Status: api.StatusOK, Outputs: []api.Output{out},
			Artifacts: []api.Artifact{{Path: "/artifacts/s/" + name, Name: name, Size: int64(size) * 3 / 4, MIME: "image/png"}},
		}, nil
	}
}

// dataBytes is the display data a Result holds.
func dataBytes(res *api.Result) int64 {
	var n int64
	for _, o := range res.Outputs {
		for _, v := range o.Data {
			n += int64(len(v))
		}
	}
	return n
}

func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestKeptResultsBounded: 50 calls whose Results each hold 8 MiB of display
// data keep at most the default 128 MiB of Results (issue 21 item 2: kept
// Results had no bound, and 1,000 of them could hold tens of GB), measured by
// what the kept Results hold and by the heap after GC. The oldest Results lose
// their bodies first, and still answer with their status and a note. Not
// parallel: it measures the heap.
func TestKeptResultsBounded(t *testing.T) {
	const size, n = 8 << 20, 50
	before := heapInuse()
	// The logs share the display data: the heap shows what both keep.
	r := newRegistry(t, displaying(size), calls.Options{})
	var cs []*calls.Call
	for i := range n {
		c, err := r.Start(context.Background(), api.Request{SessionID: "s", Code: fmt.Sprint(i)})
		require.NoError(t, err)
		<-c.Done()
		cs = append(cs, c)
	}
	for _, c := range cs {
		_, err := r.Get(c.ID())
		require.NoError(t, err, "a call is kept (MaxCalls is 1000)")
	}
	keptBytes := func() int64 {
		var n int64
		for _, c := range cs {
			res, _ := c.Final()
			require.NotNil(t, res)
			n += dataBytes(res)
		}
		return n
	}
	// A call's Result is counted (and the bound enforced) by its goroutine just
	// after the call is done: the last one may be a moment behind, and then
	// the registry counts less than the Results hold.
	assert.Eventually(t, func() bool { k := keptBytes(); return k <= 128<<20 && r.TotalResultBytes() >= k }, 10*time.Second, 10*time.Millisecond)
	kept := keptBytes()
	heap := heapInuse()
	heap -= min(before, heap)
	t.Logf("display data kept in Results: %d MiB; logs: %d MiB; heap in use after GC: %d MiB (before: %d MiB)", kept>>20, r.TotalLogBytes()>>20, heap>>20, before>>20)
	assert.LessOrEqual(t, kept, int64(128<<20), "display data kept across Results")
	assert.LessOrEqual(t, r.TotalResultBytes(), int64(128<<20), "the registry's count")
	assert.Greater(t, r.TotalResultBytes(), int64(120<<20), "the registry counts what it keeps")
	assert.Less(t, heap, uint64(200<<20), "heap held by the kept calls")

	newest, _ := cs[n-1].Final()
	assert.Equal(t, int64(size+2+len(`"<Figure>"`)), dataBytes(newest), "the newest Result is kept whole")
	assert.False(t, newest.Truncated)
	oldest := cs[0].Info(true, false)
	require.NotNil(t, oldest.Result, "an evicted Result still answers")
	assert.Equal(t, api.StatusOK, oldest.Status)
	assert.Equal(t, api.StatusOK, oldest.Result.Status)
	assert.True(t, oldest.Result.Truncated)
	assert.Contains(t, oldest.Result.TruncationNote, "memory")
	require.Len(t, oldest.Result.Artifacts, 1, "the artifacts stay listed: the display is still on disk")
	assert.Zero(t, dataBytes(oldest.Result))
	assert.Zero(t, oldest.LogBytes, "an evicted call's log is emptied: its events share the Result's data")
	_, truncs := readAll(t, cs[0], 0)
	require.Len(t, truncs, 1, "readers are told")
	assert.Equal(t, int64(2), truncs[0].Events)
	runtime.KeepAlive(cs)
}

// fixed is a runner that returns res, after an event.
func fixed(res *api.Result) runFunc {
	return func(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error) {
		onEvent(api.Event{Type: "status", State: "running"})
		return res, nil
	}
}

func png(size int, artifact string) api.Output {
	raw := bytes.Repeat([]byte("QUJD"), size/4+1)[:size]
	raw[0], raw[size-1] = '"', '"'
	o := api.Output{OutputType: "display_data", Data: map[string]json.RawMessage{
		"image/png": raw, "text/plain": json.RawMessage(`"<Figure>"`),
	}}
	if artifact != "" {
		o.Artifacts = map[string]string{"image/png": artifact}
	}
	return o
}

// TestKeptResultSlimmed: a Result over the per-result bound is kept slimmed (its
// big display data first, then its longest texts), marked truncated with a
// note saying what went; one within it is kept as it is; the Result the runner
// returned is never changed (the call's log shares its data).
func TestKeptResultSlimmed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		max   int64 // 0: the default
		res   func() *api.Result
		check func(t *testing.T, orig, kept *api.Result)
	}{{
		name: "stdout over the default 64 MiB",
		res: func() *api.Result {
			return &api.Result{SessionID: "s", Status: api.StatusOK, Stdout: "first line\n" + strings.Repeat("x", 70<<20)}
		},
		check: func(t *testing.T, orig, kept *api.Result) {
			assert.True(t, strings.HasPrefix(kept.Stdout, "first line\nxxx"), "the start stays")
			assert.Contains(t, kept.Stdout, "bytes cut from this kept result")
			assert.Contains(t, kept.TruncationNote, "64 MiB per kept result")
			assert.Len(t, orig.Stdout, 70<<20+11)
		},
	}, {
		name: "display saved as an artifact",
		max:  1 << 20,
		res: func() *api.Result {
			return &api.Result{SessionID: "s", Status: api.StatusOK, Stdout: "done\n",
				Outputs: []api.Output{png(2<<20, "display/cell1-ab-1.png"), png(100, "display/cell1-ab-2.png")}}
		},
		check: func(t *testing.T, orig, kept *api.Result) {
			assert.Equal(t, "done\n", kept.Stdout, "texts stay when dropping data is enough")
			assert.NotContains(t, kept.Outputs[0].Data, "image/png")
			assert.Contains(t, kept.Outputs[0].Data, "text/plain")
			assert.Contains(t, kept.Outputs[1].Data, "image/png", "small data stays")
			assert.Contains(t, kept.TruncationNote, "saved as artifacts, nothing lost: outputs[0] image/png (artifact display/cell1-ab-1.png)")
			assert.Contains(t, orig.Outputs[0].Data, "image/png")
		},
	}, {
		name: "display not saved, and a long traceback",
		max:  1 << 20,
		res: func() *api.Result {
			return &api.Result{SessionID: "s", Status: api.StatusError,
				Outputs: []api.Output{png(2<<20, "")},
				Error:   &api.ErrorInfo{Ename: "ValueError", Evalue: "bad", Traceback: []string{strings.Repeat("t", 3<<20)}}}
		},
		check: func(t *testing.T, orig, kept *api.Result) {
			assert.Contains(t, kept.TruncationNote, "not saved anywhere: outputs[0] image/png")
			assert.Contains(t, kept.TruncationNote, "of its longest texts cut")
			assert.Equal(t, "ValueError", kept.Error.Ename)
			assert.Len(t, orig.Error.Traceback[0], 3<<20)
			assert.Less(t, len(kept.Error.Traceback[0]), 1<<20)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			orig := tc.res()
			r := newRegistry(t, fixed(orig), calls.Options{MaxResultBytes: tc.max})
			c, err := r.Start(context.Background(), api.Request{SessionID: "s", Code: "x"})
			require.NoError(t, err)
			kept, err := c.Wait(context.Background())
			require.NoError(t, err)
			assert.True(t, orig != kept, "a Result over the bound is kept as it came")
			assert.True(t, kept.Truncated)
			limit := cmp.Or(tc.max, 64<<20)
			b, err := json.Marshal(kept)
			require.NoError(t, err)
			assert.LessOrEqual(t, int64(len(b)), limit, "its JSON is within the bound")
			assert.Equal(t, orig.Status, kept.Status)
			tc.check(t, orig, kept)
			assert.False(t, orig.Truncated, "the runner's Result is unchanged")
		})
	}
	t.Run("within the bound", func(t *testing.T) {
		t.Parallel()
		orig := &api.Result{SessionID: "s", Status: api.StatusOK, Outputs: []api.Output{png(2<<20, "")}}
		r := newRegistry(t, fixed(orig), calls.Options{MaxResultBytes: 3 << 20})
		c, err := r.Start(context.Background(), api.Request{SessionID: "s", Code: "x"})
		require.NoError(t, err)
		kept, err := c.Wait(context.Background())
		require.NoError(t, err)
		assert.True(t, orig == kept, "a Result within the bound is kept as it is")
	})
}
