package keep

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeKeeper keeps the odd numbers and records what Detach asked, in order.
type fakeKeeper struct {
	mu     sync.Mutex
	events []string
	// dropping counts the drops under way; allIn is closed once want of them
	// run at once (they are each in a goroutine of their own).
	dropping, want int
	allIn          chan struct{}
}

func (k *fakeKeeper) note(e string) {
	k.mu.Lock()
	k.events = append(k.events, e)
	k.mu.Unlock()
}

func (k *fakeKeeper) Keep(n int) bool { return n%2 == 1 }

func (k *fakeKeeper) Drop(ctx context.Context, n int) error {
	k.mu.Lock()
	k.dropping++
	if k.dropping == k.want {
		close(k.allIn)
	}
	k.mu.Unlock()
	select {
	case <-k.allIn:
	case <-time.After(10 * time.Second):
		return errors.New("the drops did not run at once")
	}
	k.note(fmt.Sprint("drop ", n))
	if n == 4 {
		return errors.New("four")
	}
	return ctx.Err()
}

func (k *fakeKeeper) Release(n int) { k.note(fmt.Sprint("release ", n)) }

// TestDetach: what Keep refuses is dropped (each once, all at once, before the
// last write) and its errors returned; the state file is written once more, and
// no Save after it writes; what Keep accepts is released after the write and
// returned in order.
func TestDetach(t *testing.T) {
	t.Parallel()
	k := &fakeKeeper{want: 3, allIn: make(chan struct{})}
	var w Writes
	kept, errs := Detach(context.Background(), []int{1, 2, 3, 4, 5, 6}, k, &w, func() { k.note("final") })
	if !slices.Equal(kept, []int{1, 3, 5}) {
		t.Fatalf("kept %v", kept)
	}
	if err := errors.Join(errs...); len(errs) != 3 || err == nil || err.Error() != "four" {
		t.Fatalf("errors %v", errs)
	}
	w.Save(func() { k.note("save after detach") })
	drops, rest := k.events[:3], k.events[3:]
	slices.Sort(drops)
	if !slices.Equal(drops, []string{"drop 2", "drop 4", "drop 6"}) ||
		!slices.Equal(rest, []string{"final", "release 1", "release 3", "release 5"}) {
		t.Fatalf("events %q", k.events)
	}
}

// TestDetachNothing: with nothing to drop or keep, Detach still writes the last
// list.
func TestDetachNothing(t *testing.T) {
	t.Parallel()
	k := &fakeKeeper{}
	var w Writes
	kept, errs := Detach(context.Background(), nil, k, &w, func() { k.note("final") })
	if len(kept) != 0 || len(errs) != 0 || !slices.Equal(k.events, []string{"final"}) {
		t.Fatalf("kept %v, errors %v, events %q", kept, errs, k.events)
	}
}
