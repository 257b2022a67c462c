package calls

import (
	"context"
	"sync"

	"github.com/kernelbox/kernelbox/api"
)

// Event is one event of a call's log with its sequence number (1, 2, ...).
type Event struct {
	Seq int64
	api.Event
}

// Batch is what one [Call.Read] returns, in order: a notice of events dropped
// before the reader got them (if any), then events, then whether the log is
// complete.
type Batch struct {
	// Truncated, when set, says which events after the reader's position were
	// dropped from the log before it asked; Events continue after them.
	Truncated *api.Truncation
	// Events are the next events, in order, without gaps after Truncated.
	Events []Event
	// Done is set when the call has ended and these are its last events: the
	// reader is at the end of the log and may read the call's final answer.
	Done bool
}

// Last returns the sequence number of the batch's last event or truncation,
// or after when it has neither.
func (b Batch) Last(after int64) int64 {
	if n := len(b.Events); n > 0 {
		return b.Events[n-1].Seq
	}
	if b.Truncated != nil {
		return b.Truncated.To
	}
	return after
}

// maxBatch bounds the events one Read returns, so that a reader far behind
// writes and flushes as it goes.
const maxBatch = 512

// dropWindow is how many dropped events' byte offsets a log remembers, so that a
// truncation notice states the bytes a reader missed exactly; a reader further
// behind than that is told the bytes of the dropped events it can still be
// accounted for plus the count of all it missed (see api.Truncation).
const dropWindow = 1 << 16

// eventLog is a call's bounded log of events. Appends never wait for readers:
// past maxBytes, the oldest events are dropped and counted. It is safe for
// concurrent use.
type eventLog struct {
	maxBytes int64
	onGrow   func(delta int64) // reports byte changes to the registry's total

	mu      sync.Mutex
	entries []entry // entries[head:] are held; their seqs are base, base+1, ...
	head    int
	base    int64 // seq of entries[head] (or of the next event when none is held)
	bytes   int64 // size of the held entries
	dropped int64 // bytes of all dropped events (the offset of seq base)
	// dropCum[i] is the offset of seq base-len(dropCum)+i: the last dropped
	// events' offsets, for exact truncation notices.
	dropCum []int64
	closed  bool
	wake    chan struct{} // closed on the next append or close, when readers wait
}

type entry struct {
	ev   api.Event
	size int64
	cum  int64 // byte offset of this event in the whole log
}

func newEventLog(maxBytes int64, onGrow func(int64)) *eventLog {
	return &eventLog{maxBytes: maxBytes, onGrow: onGrow, base: 1}
}

// next returns the sequence number the next appended event gets.
func (l *eventLog) next() int64 { return l.base + int64(len(l.entries)-l.head) }

// append adds ev, dropping the oldest events while the log is over its bound (the
// newest event is always held). It never blocks on readers.
func (l *eventLog) append(ev api.Event) {
	size := eventSize(ev)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	cum := l.dropped + l.bytes
	l.entries = append(l.entries, entry{ev: ev, size: size, cum: cum})
	l.bytes += size
	freed := l.trimLocked(l.maxBytes)
	l.wakeLocked()
	l.mu.Unlock()
	if l.onGrow != nil {
		l.onGrow(size - freed)
	}
}

// trimLocked drops the oldest entries while the held bytes exceed max, keeping
// the newest entry, and returns the bytes freed.
func (l *eventLog) trimLocked(max int64) int64 {
	var freed int64
	for l.bytes > max && len(l.entries)-l.head > 1 {
		l.dropOneLocked(&freed)
	}
	l.compactLocked()
	return freed
}

func (l *eventLog) dropOneLocked(freed *int64) {
	e := l.entries[l.head]
	l.entries[l.head] = entry{}
	l.head++
	if len(l.dropCum) >= dropWindow {
		l.dropCum = l.dropCum[1:]
	}
	l.dropCum = append(l.dropCum, e.cum)
	l.base++
	l.bytes -= e.size
	l.dropped += e.size
	*freed += e.size
}

// compactLocked reclaims the slots of dropped entries once they are half the slice.
func (l *eventLog) compactLocked() {
	if l.head > 64 && l.head*2 >= len(l.entries) {
		n := copy(l.entries, l.entries[l.head:])
		clear(l.entries[n:])
		l.entries = l.entries[:n]
		l.head = 0
	}
	if cap(l.dropCum) > 2*dropWindow {
		l.dropCum = append([]int64(nil), l.dropCum...)
	}
}

// dropAll drops every held event (the registry's total bound, for finished
// calls) and returns the bytes freed.
func (l *eventLog) dropAll() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var freed int64
	for len(l.entries)-l.head > 0 {
		l.dropOneLocked(&freed)
	}
	l.compactLocked()
	return freed
}

// close marks the log complete: nothing is appended after it.
func (l *eventLog) close() {
	l.mu.Lock()
	l.closed = true
	l.wakeLocked()
	l.mu.Unlock()
}

func (l *eventLog) wakeLocked() {
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}

// read returns the events after seq after, waiting for one when there is none
// yet and the log is still open. It returns ctx's error when ctx ends first.
func (l *eventLog) read(ctx context.Context, after int64) (Batch, error) {
	for {
		l.mu.Lock()
		if after < 0 {
			after = 0
		}
		if after+1 < l.next() || l.closed {
			b := l.batchLocked(after)
			l.mu.Unlock()
			return b, nil
		}
		if l.wake == nil {
			l.wake = make(chan struct{})
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return Batch{}, ctx.Err()
		}
	}
}

// batchLocked builds the answer for a reader at after (which is before next).
func (l *eventLog) batchLocked(after int64) Batch {
	var b Batch
	if after+1 < l.base {
		b.Truncated = l.truncationLocked(after+1, l.base-1)
		after = l.base - 1
	}
	start := l.head + int(after+1-l.base)
	end := min(len(l.entries), start+maxBatch)
	if start < end {
		b.Events = make([]Event, 0, end-start)
		for i := start; i < end; i++ {
			b.Events = append(b.Events, Event{Seq: l.base + int64(i-l.head), Event: l.entries[i].ev})
		}
	}
	b.Done = l.closed && end >= len(l.entries)
	return b
}

// truncationLocked describes the dropped events from..to (to is base-1).
func (l *eventLog) truncationLocked(from, to int64) *api.Truncation {
	t := &api.Truncation{From: from, To: to, Events: to - from + 1}
	oldest := l.base - int64(len(l.dropCum)) // seq of dropCum[0]
	switch {
	case from == 1:
		t.Bytes = l.dropped
	case from >= oldest:
		t.Bytes = l.dropped - l.dropCum[from-oldest]
	case len(l.dropCum) > 0:
		// Older than the window: the bytes the window accounts for, a lower
		// bound (Events is exact).
		t.Bytes = l.dropped - l.dropCum[0]
	}
	return t
}

// stats returns the log's counters: the last seq, held bytes, dropped events
// and dropped bytes.
func (l *eventLog) stats() (last, held, droppedEvents, droppedBytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next() - 1, l.bytes, l.base - 1, l.dropped
}

// snapshot returns the held events (for a reader that wants everything at once).
func (l *eventLog) snapshot() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Event, 0, len(l.entries)-l.head)
	for i := l.head; i < len(l.entries); i++ {
		out = append(out, Event{Seq: l.base + int64(i-l.head), Event: l.entries[i].ev})
	}
	return out
}

// eventSize is an event's weight against the log's bounds: its text and data
// plus a fixed overhead, close to its JSON size.
func eventSize(ev api.Event) int64 {
	n := 64 + len(ev.Type) + len(ev.State) + len(ev.Name) + len(ev.Text)
	if o := ev.Output; o != nil {
		n += len(o.Text) + len(o.Ename) + len(o.Evalue) + len(o.DisplayID)
		for k, v := range o.Data {
			n += len(k) + len(v)
		}
		for k, v := range o.Metadata {
			n += len(k) + len(v)
		}
		for _, tb := range o.Traceback {
			n += len(tb)
		}
	}
	return int64(n)
}
