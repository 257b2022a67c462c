package keep

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/executor"
)

// counter follows how many calls of one run at once.
type counter struct {
	mu        sync.Mutex
	now, most int
	calls     map[string]int
}

func (c *counter) enter(session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now++
	c.most = max(c.most, c.now)
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[session]++
}

func (c *counter) leave() {
	c.mu.Lock()
	c.now--
	c.mu.Unlock()
}

// barrier returns a wait that blocks until n callers wait, or fails after a while.
func barrier(n int) func() error {
	var mu sync.Mutex
	in := 0
	all := make(chan struct{})
	return func() error {
		mu.Lock()
		if in++; in == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			return nil
		case <-time.After(10 * time.Second):
			return fmt.Errorf("%d of %d calls ran at once", in, n)
		}
	}
}

// firstWait returns a wait for the calls of one run: the first n to start wait
// for each other, then a while (time for one more to start, were there no
// bound); the rest go on at once. A non-empty string says why a wait failed.
func firstWait(n int) func() string {
	all := barrier(n)
	var mu sync.Mutex
	started := 0
	return func() string {
		mu.Lock()
		started++
		mine := started
		mu.Unlock()
		if mine > n {
			return ""
		}
		err := all()
		time.Sleep(20 * time.Millisecond)
		if err != nil {
			return err.Error()
		}
		return ""
	}
}

func sessions(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("s%02d", i)
	}
	return out
}

// TestReattachBound: with a bound of 3, never more than 3 records are taken back
// at once, and 3 are (the first three wait for each other, then a while); each record is
// taken back once and every outcome, lost or not, is returned.
func TestReattachBound(t *testing.T) {
	t.Parallel()
	var c counter
	wait := firstWait(3)
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	out := Reattach(ctx, sessions(20), 3, func(ctx context.Context, s string) executor.Reattached {
		c.enter(s)
		defer c.leave()
		r := executor.Reattached{Session: s, Lost: wait()}
		if ctx.Value(key{}) != "v" {
			r.Lost = "ctx not passed"
		}
		if s == "s07" {
			r.Lost = "gone"
		}
		return r
	})
	if c.most != 3 {
		t.Fatalf("at most %d at once, want 3", c.most)
	}
	var got []string
	for _, r := range out {
		got = append(got, r.Session)
		if r.Lost != "" && !(r.Session == "s07" && r.Lost == "gone") {
			t.Errorf("%s: lost %q", r.Session, r.Lost)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, sessions(20)) {
		t.Fatalf("outcomes for %v", got)
	}
	for s, k := range c.calls {
		if k != 1 {
			t.Errorf("%s taken back %d times", s, k)
		}
	}
}

// TestReattachDefaultBound: with no bound given (0), DefaultAtOnce records are
// taken back at once (all of them wait for each other), never more, and every
// record has its outcome.
func TestReattachDefaultBound(t *testing.T) {
	t.Parallel()
	var c counter
	wait := firstWait(DefaultAtOnce)
	out := Reattach(context.Background(), sessions(3*DefaultAtOnce), 0, func(_ context.Context, s string) executor.Reattached {
		c.enter(s)
		defer c.leave()
		return executor.Reattached{Session: s, Lost: wait()}
	})
	if c.most != DefaultAtOnce {
		t.Fatalf("at most %d at once, want %d", c.most, DefaultAtOnce)
	}
	if len(out) != 3*DefaultAtOnce {
		t.Fatalf("%d outcomes", len(out))
	}
	for _, r := range out {
		if r.Lost != "" {
			t.Fatalf("%s: %s", r.Session, r.Lost)
		}
	}
}

// TestReattachNone: no records, no call and no outcome.
func TestReattachNone(t *testing.T) {
	t.Parallel()
	out := Reattach(context.Background(), []string(nil), 4, func(context.Context, string) executor.Reattached {
		t.Error("called")
		return executor.Reattached{}
	})
	if out == nil || len(out) != 0 {
		t.Fatalf("out %v", out)
	}
}
