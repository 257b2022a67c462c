package calls

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kernelbox/kernelbox/api"
)

// Call is one registered call: its request, its event log and, once it has
// ended, its final answer. It is safe for concurrent use; readers follow its log
// at their own pace with [Call.Read].
type Call struct {
	id      string
	req     api.Request
	created time.Time
	log     *eventLog
	cancel  context.CancelFunc
	done    chan struct{} // closed when the call has ended

	mu        sync.Mutex
	state     api.CallState
	started   time.Time
	finished  time.Time
	res       *api.Result // as kept: see Options.MaxResultBytes
	resBytes  int64       // res's size, as the Result bounds count it
	evicted   bool        // res's body was evicted for the total bound
	err       error
	cancelled bool
	lost      bool // ended with the process that ran it (journal.go)
}

// ID returns the call's id.
func (c *Call) ID() string { return c.id }

// SessionID returns the call's session id.
func (c *Call) SessionID() string { return c.req.SessionID }

// Done returns a channel closed when the call has ended.
func (c *Call) Done() <-chan struct{} { return c.done }

// Wait waits for the call to end (or ctx) and returns its final answer, as
// [Call.Final] does.
func (c *Call) Wait(ctx context.Context) (*api.Result, error) {
	select {
	case <-c.done:
		return c.Final()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Final returns the call's Result and error as the executor returned them: a
// Result (with a nil error) when it ran, an error when it could not run (some
// errors, such as a denial, come with a Result too). Before the call has ended it
// returns nil, nil. A Result over the registry's bounds is kept slimmed, and the
// oldest lose their bodies past the total bound (see Options.MaxResultBytes and
// Options.MaxTotalResultBytes); either is marked truncated with a note. The
// Result returned is never changed afterwards.
func (c *Call) Final() (*api.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.res, c.err
}

// Read returns the events after sequence number after (0 for all of them),
// waiting until there is at least one or the call has ended. Events dropped from
// the log before the reader got them are reported in Batch.Truncated, never
// skipped silently. When Batch.Done is set the reader has every event; the
// call's answer is then [Call.Final].
func (c *Call) Read(ctx context.Context, after int64) (Batch, error) {
	return c.log.read(ctx, after)
}

// Events returns the events the log still holds, in order.
func (c *Call) Events() []Event { return c.log.snapshot() }

// LastSeq returns the sequence number of the call's last event so far.
func (c *Call) LastSeq() int64 {
	last, _, _, _ := c.log.stats()
	return last
}

// Cancel interrupts the call: a queued call is dropped, a running one is
// interrupted by the executor, which reports it in the Result. It returns
// api.ErrCallFinished when the call has already ended.
func (c *Call) Cancel() error {
	c.mu.Lock()
	if c.state == api.CallDone {
		c.mu.Unlock()
		return fmt.Errorf("cancel call %s: %w", c.id, api.ErrCallFinished)
	}
	c.cancelled = true
	c.mu.Unlock()
	c.cancel()
	return nil
}

// Info returns a snapshot of the call; withResult adds the Result when the call
// is done. Code longer than api.MaxCallCodeBytes is clipped when clip is set.
func (c *Call) Info(withResult, clip bool) api.CallInfo {
	last, held, dEvents, dBytes := c.log.stats()
	c.mu.Lock()
	defer c.mu.Unlock()
	info := api.CallInfo{
		CallID: c.id, SessionID: c.req.SessionID, Code: c.req.Code,
		State: c.state, Created: c.created, Started: c.started, Finished: c.finished,
		Events: last, LogBytes: held, DroppedEvents: dEvents, DroppedBytes: dBytes,
		Cancelled: c.cancelled,
	}
	if clip && len(info.Code) > api.MaxCallCodeBytes {
		info.Code, info.CodeClipped = clipUTF8(info.Code, api.MaxCallCodeBytes), true
	}
	end := c.finished
	if end.IsZero() {
		end = time.Now()
	}
	info.DurationMS = end.Sub(c.created).Milliseconds()
	if c.res != nil {
		info.Status = c.res.Status
		if withResult {
			info.Result = c.res
		}
	}
	if c.err != nil {
		code, _ := api.CodeOf(c.err)
		info.Error = &api.ErrorDetail{Code: code, Message: c.err.Error()}
	}
	if c.lost {
		info.Status = api.CallLost
	}
	return info
}

// onEvent is the executor's callback: it runs on the session's reader path, so
// it only records the event (and the start of the run) in memory.
func (c *Call) onEvent(ev api.Event) {
	if ev.Type == "status" && ev.State == "running" {
		c.mu.Lock()
		if c.state == api.CallQueued {
			c.state, c.started = api.CallRunning, time.Now()
		}
		c.mu.Unlock()
	}
	c.log.append(ev)
}

// finish records the call's answer (already slimmed: size is what it keeps) and
// completes its log.
func (c *Call) finish(res *api.Result, size int64, err error) {
	c.mu.Lock()
	c.state, c.finished, c.res, c.resBytes, c.err = api.CallDone, time.Now(), res, size, err
	c.mu.Unlock()
	c.log.close()
	close(c.done)
}

// evict replaces the kept Result with what is kept of it once its body goes
// for the total bound of total bytes, and returns the bytes freed.
func (c *Call) evict(total int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.res == nil || c.evicted {
		return 0
	}
	e := evicted(c.res, c.resBytes, total)
	size := resultSize(e)
	freed := c.resBytes - size
	if freed <= 0 {
		return 0
	}
	c.res, c.resBytes, c.evicted = e, size, true
	return freed
}

// keptBytes returns the size of the kept Result.
func (c *Call) keptBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resBytes
}

// finishedAt returns when the call ended, or the zero time.
func (c *Call) finishedAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.finished
}

// clipUTF8 cuts s to at most n bytes without splitting a character.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
