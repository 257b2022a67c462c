package executor

import (
	"sync"

	"github.com/kernelbox/kernelbox/api"
)

// WatchKind says what a Watched reports.
type WatchKind int

const (
	// WatchStart: a call's code is about to run (Code, Source, ExecutionCount).
	WatchStart WatchKind = iota
	// WatchEvent: one of the call's events, as its caller receives it (Event).
	WatchEvent
	// WatchEnd: the call ended (Result, or Err when it failed to run).
	WatchEnd
	// WatchClosed: the session closed; nothing more comes.
	WatchClosed
)

// Watched is what a session's watcher sees of the calls that run on it, whoever
// asked for them (an agent over /v1 or MCP, the CLI, a Jupyter client).
type Watched struct {
	Kind WatchKind
	// Call numbers the session's calls as they run, from 1; every report of one
	// call carries its number.
	Call int64
	// Source is the call's Request.Source ("" for /v1, MCP and the CLI).
	Source string

	Code           string    // WatchStart: the call's code
	ExecutionCount int       // WatchStart: the execution count the code runs as (the kernel's may differ after a restart)
	Event          api.Event // WatchEvent
	Result         *api.Result
	Err            error
}

// Watch calls fn with every call that runs on session id from now on, until the
// returned stop is called or the session closes (WatchClosed is its last report).
// fn runs on the goroutines that deliver the call's events, so it must not block:
// queue what it gets and drop a reader that does not keep up (a watcher never
// slows the session's calls). It fails with api.ErrNotFound when the session does
// not exist.
func (e *Executor) Watch(id string, fn func(Watched)) (stop func(), err error) {
	s, err := e.lookup(id)
	if err != nil {
		return nil, err
	}
	return s.taps.add(fn), nil
}

// taps is a session's watchers.
type taps struct {
	mu    sync.Mutex
	next  int
	fns   map[int]func(Watched)
	calls int64 // calls numbered so far
	done  bool  // WatchClosed was sent
}

func (t *taps) add(fn func(Watched)) (stop func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		go fn(Watched{Kind: WatchClosed})
		return func() {}
	}
	if t.fns == nil {
		t.fns = map[int]func(Watched){}
	}
	id := t.next
	t.next++
	t.fns[id] = fn
	return func() {
		t.mu.Lock()
		delete(t.fns, id)
		t.mu.Unlock()
	}
}

// send gives w to every watcher.
func (t *taps) send(w Watched) {
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return
	}
	if w.Kind == WatchClosed {
		t.done = true
	}
	if len(t.fns) == 0 {
		// The usual case, on every event of every call: nothing to copy.
		t.mu.Unlock()
		return
	}
	fns := make([]func(Watched), 0, len(t.fns))
	for _, fn := range t.fns {
		fns = append(fns, fn)
	}
	if w.Kind == WatchClosed {
		t.fns = nil
	}
	t.mu.Unlock()
	for _, fn := range fns {
		fn(w)
	}
}

// number returns the next call's number.
func (t *taps) number() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls++
	return t.calls
}

// executeWatched runs an execute job and shows it to the session's watchers: its
// start, each of its events (after its own caller got it) and its end.
func (s *session) executeWatched(j *job) (*api.Result, error) {
	n := s.taps.number()
	s.mu.Lock()
	count := s.state.ExecutionCount + 1
	s.mu.Unlock()
	src := j.req.Source
	s.taps.send(Watched{Kind: WatchStart, Call: n, Source: src, Code: j.req.Code, ExecutionCount: count})
	tap := func(ev api.Event) { s.taps.send(Watched{Kind: WatchEvent, Call: n, Source: src, Event: ev}) }
	j.tap.Store(&tap)
	r, err := s.execute(j)
	j.tap.Store(nil)
	s.taps.send(Watched{Kind: WatchEnd, Call: n, Source: src, Result: r, Err: err})
	return r, err
}
