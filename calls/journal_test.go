package calls_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
)

// TestJournalLostCalls: calls that had not ended when their registry's process
// ended are answered by the next registry on the same journal as lost, with the
// reason (killed, or stopped), never as not found; a call that ended is not.
func TestJournalLostCalls(t *testing.T) {
	t.Parallel()
	for _, stop := range []bool{false, true} {
		name := map[bool]string{false: "killed", true: "stopped"}[stop]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			journal := filepath.Join(t.TempDir(), "calls.json")
			release := make(chan struct{})
			blocked := gated(1, release)
			old := calls.New(runFunc(func(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error) {
				if req.SessionID == "s0" {
					return gated(1, nil)(ctx, req, onEvent)
				}
				return blocked(ctx, req, onEvent)
			}), calls.Options{Journal: journal})
			ctx := context.Background()
			done, err := old.Run(ctx, api.Request{SessionID: "s0", Code: "1"})
			require.NoError(t, err)
			var ids []string
			for _, s := range []string{"s1", "s2"} {
				c, err := old.Start(ctx, api.Request{SessionID: s, Code: "import time; time.sleep(60)"})
				require.NoError(t, err)
				ids = append(ids, c.ID())
			}
			fi, err := os.Stat(journal)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
			if stop {
				// A graceful stop: the journal is written, then the runner's
				// stop ends the calls; that is not written any more.
				old.StopJournal()
				close(release)
				require.NoError(t, old.Close())
			} else {
				// The process "dies": the next registry reads the journal as it is.
				t.Cleanup(func() { close(release); _ = old.Close() })
			}

			r := newRegistry(t, gated(1, nil), calls.Options{Journal: journal})
			for i, id := range ids {
				c, err := r.Get(id)
				require.NoError(t, err, "a lost call is never not found")
				info := c.Info(true, true)
				assert.Equal(t, api.CallDone, info.State)
				assert.Equal(t, api.CallLost, info.Status)
				require.NotNil(t, info.Error)
				assert.Equal(t, api.CodeCallLost, info.Error.Code)
				want := "killed or crashed"
				if stop {
					want = "was stopped"
				}
				assert.Contains(t, info.Error.Message, want)
				assert.Equal(t, []string{"s1", "s2"}[i], info.SessionID)
				_, err = c.Wait(ctx)
				assert.ErrorIs(t, err, api.ErrCallLost)
				assert.ErrorIs(t, c.Cancel(), api.ErrCallFinished)
			}
			_, err = r.Get(done.ID())
			assert.ErrorIs(t, err, api.ErrNotFound, "a call that ended is not in the journal")
			// The journal was emptied: a third start finds nothing more.
			if stop {
				third := calls.New(gated(1, nil), calls.Options{Journal: journal})
				_, err = third.Get(ids[0])
				assert.ErrorIs(t, err, api.ErrNotFound)
				require.NoError(t, third.Close())
			}
		})
	}
}

// TestJournalCorrupt: a journal that is not one is set aside and reported, and
// the registry starts empty.
func TestJournalCorrupt(t *testing.T) {
	t.Parallel()
	for name, content := range map[string]string{
		"garbage":     "{not json",
		"empty":       "",
		"version":     `{"version": 99}` + "\n" + `{"op": "+", "id": "c1-1", "session": "s"}`,
		"bad entries": `{"version": 1}` + "\n" + `{"op": "+", "id": "", "session": "s"}` + "\n" + `{"op": "+", "id": "x", "session": "../etc"}` + "\n" + `{"op": "+", "id": "c1-1", "sess`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			journal := filepath.Join(t.TempDir(), "calls.json")
			require.NoError(t, os.WriteFile(journal, []byte(content), 0o600))
			r := newRegistry(t, gated(1, nil), calls.Options{Journal: journal})
			_, err := r.Get("c1-1")
			assert.ErrorIs(t, err, api.ErrNotFound)
			_, err = r.Get("x")
			assert.ErrorIs(t, err, api.ErrNotFound)
			if name != "bad entries" {
				_, err = os.Stat(journal + ".bad")
				assert.NoError(t, err, "the unreadable journal is set aside")
			}
		})
	}
}

// BenchmarkRunJournal is a call's cost in the registry with and without the
// journal (two rewrites of the file per call).
func BenchmarkRunJournal(b *testing.B) {
	for _, journal := range []bool{false, true} {
		b.Run(map[bool]string{false: "none", true: "journal"}[journal], func(b *testing.B) {
			o := calls.Options{}
			if journal {
				o.Journal = filepath.Join(b.TempDir(), "calls.json")
			}
			r := newRegistry(b, gated(1, nil), o)
			ctx := context.Background()
			for b.Loop() {
				if _, err := r.Run(ctx, api.Request{SessionID: "s", Code: "1"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestJournalCompaction: past its compaction bound the journal is rewritten with
// the calls still open, and reads back the same: the open calls lost, the ended
// ones not.
func TestJournalCompaction(t *testing.T) {
	t.Parallel()
	journal := filepath.Join(t.TempDir(), "calls.json")
	release := make(chan struct{})
	blocked := gated(1, release)
	old := calls.New(runFunc(func(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error) {
		if req.SessionID == "slow" {
			return blocked(ctx, req, onEvent)
		}
		return gated(1, nil)(ctx, req, onEvent)
	}), calls.Options{Journal: journal, MaxCalls: 10})
	t.Cleanup(func() { close(release); _ = old.Close() })
	ctx := context.Background()
	var open []string
	for range 3 {
		c, err := old.Start(ctx, api.Request{SessionID: "slow", Code: "sleep"})
		require.NoError(t, err)
		open = append(open, c.ID())
	}
	var ended string
	for range 5000 { // 10,000 lines: the journal is rewritten twice
		c, err := old.Run(ctx, api.Request{SessionID: "quick", Code: "1"})
		require.NoError(t, err)
		ended = c.ID()
	}
	fi, err := os.Stat(journal)
	require.NoError(t, err)
	assert.Less(t, fi.Size(), int64(1<<20), "compacted")

	r := newRegistry(t, gated(1, nil), calls.Options{Journal: journal})
	for _, id := range open {
		c, err := r.Get(id)
		require.NoError(t, err)
		assert.Equal(t, api.CallLost, c.Info(false, true).Status)
	}
	_, err = r.Get(ended)
	assert.ErrorIs(t, err, api.ErrNotFound)
	assert.Len(t, r.List("quick"), 0)
}
