// Package calls keeps the calls of a server in a registry so that they outlive
// the connections that started them: each call runs on a goroutine the registry
// owns and writes its events into a bounded log that any number of readers
// follow at their own pace, from the start or after a sequence number. Start
// reading at [New] and [Registry.Start], then [Call.Read].
package calls

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kernelbox/kernelbox/api"
)

// Runner runs one call, calling onEvent for each event as it happens;
// *executor.Executor is one. onEvent is called on the runner's behalf and only
// records the event in memory. Validate checks a request's shape (an error
// wrapping api.ErrInvalidRequest) without running it, so that Start refuses at
// once what ExecuteStream would refuse.
type Runner interface {
	ExecuteStream(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error)
	Validate(req api.Request) error
}

// Options configures a Registry. The zero value works: every zero field means
// its default.
type Options struct {
	// Retention is how long a finished call (its Result and log) is kept after
	// it ended. Defaults to 1 hour.
	Retention time.Duration
	// MaxCalls caps the finished calls kept; past it the oldest finished calls
	// are dropped first. Calls still queued or running are never dropped (the
	// executor's queues bound them). Defaults to 1000.
	MaxCalls int
	// MaxLogBytes bounds one call's event log; past it the call's oldest events
	// are dropped (readers that ask for them get a truncation notice). Defaults
	// to 16 MiB.
	MaxLogBytes int64
	// MaxTotalLogBytes bounds the logs of all calls together: past it the logs
	// of the oldest finished calls are emptied first (their Results are kept).
	// Running calls are bounded by MaxLogBytes each. Like Retention it is
	// enforced when a call starts or ends and on every lookup. Defaults to
	// 256 MiB.
	MaxTotalLogBytes int64
	// MaxResultBytes bounds what a finished call keeps of its Result, counted
	// close to its JSON size. A Result over it is kept slimmed as the call
	// ends, so every reader of the call (its waiter too) gets the same one:
	// rich display data over 4 KiB goes first (what the executor saved as an
	// artifact stays on disk, listed in the Result), then the end of its
	// longest texts; the Result is marked truncated with a note saying what
	// went. Defaults to 64 MiB, above what the executor's default caps let a
	// Result hold.
	MaxResultBytes int64
	// MaxTotalResultBytes bounds the kept Results of all finished calls
	// together: past it the oldest lose their bodies (outputs, texts,
	// traceback) and keep how they ended, their artifacts and a note saying
	// why; their logs are emptied too, since their events share the Result's
	// display data. The newest finished call's Result is never evicted.
	// Defaults to 128 MiB.
	MaxTotalResultBytes int64
	// Logger receives the registry's logs. Defaults to discarding them.
	Logger *slog.Logger

	// Journal is a file private to the server where the registry lists the
	// calls that have not ended (journal.go); New reads what an earlier
	// process left there and keeps each of its calls as lost (api.CallLost),
	// with the reason. Its directory must exist. Defaults to "": none is kept.
	Journal string
}

func (o *Options) setDefaults() {
	if o.Retention <= 0 {
		o.Retention = time.Hour
	}
	if o.MaxCalls <= 0 {
		o.MaxCalls = 1000
	}
	if o.MaxLogBytes <= 0 {
		o.MaxLogBytes = 16 << 20
	}
	if o.MaxTotalLogBytes <= 0 {
		o.MaxTotalLogBytes = 256 << 20
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = 64 << 20
	}
	if o.MaxTotalResultBytes <= 0 {
		o.MaxTotalResultBytes = 128 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Registry holds calls: running ones, and finished ones within its retention.
// It owns the goroutines that run them, one per call while it runs; Close stops
// and waits for them. It has no goroutine of its own: retention and the total
// log and Result bounds are enforced whenever a call starts or ends and on every lookup, so a
// registry nobody closes holds nothing running once its calls have ended. It is
// safe for concurrent use.
type Registry struct {
	runner Runner
	o      Options
	prefix string // this registry's id prefix, "c<6 hex>-"

	mu       sync.Mutex
	calls    map[string]*Call
	finished []*Call // in the order they ended, oldest first
	last     int64   // number of the last call id handed out
	closed   bool

	jmu     sync.Mutex // serializes journal writes; guards the fields below
	jFrozen bool       // StopJournal wrote the journal's last list
	jFile   *os.File   // the journal, open for appending; nil without one
	jOps    int        // lines appended since the journal was last rewritten

	results int64          // bytes held by the Results of finished calls (mu)
	total   atomic.Int64   // bytes held by all logs
	wg      sync.WaitGroup // the calls' goroutines
}

// New returns a registry that runs calls with runner.
func New(runner Runner, o Options) *Registry {
	o.setDefaults()
	var b [3]byte
	_, _ = rand.Read(b[:])
	r := &Registry{
		runner: runner, o: o, prefix: "c" + hex.EncodeToString(b[:]) + "-",
		calls: map[string]*Call{},
	}
	if o.Journal != "" {
		r.loadJournal()
	}
	return r
}

// Start registers a call and runs it in the background.
// The call does not depend on ctx (it outlives the request that started it);
// ctx only bounds Start itself. A request the runner's Validate refuses (an
// invalid session id, no code, code or inputs over the limits) is refused here
// (api.ErrInvalidRequest); every other failure to run is the call's own answer
// (see [Call.Final]).
//
// Start returns once the runner has queued the call on its session (api.Queued),
// so that what the client sends next (a call, a file operation) is ordered after
// it; or once the call has ended before that; or after queueWait, when the call
// is still waiting before its queue (a permission prompt to a person), or when ctx
// ends: the call runs on either way.
func (r *Registry) Start(ctx context.Context, req api.Request) (*Call, error) {
	c, callCtx, err := r.register(ctx, req)
	if err != nil {
		return nil, err
	}
	queued := make(chan struct{})
	var once sync.Once
	go r.run(api.WithQueued(callCtx, func() { once.Do(func() { close(queued) }) }), c)
	t := time.NewTimer(queueWait)
	defer t.Stop()
	select {
	case <-queued:
	case <-c.done:
	case <-t.C:
	case <-ctx.Done():
	}
	return c, nil
}

// queueWait bounds how long Start waits for its call to be queued.
const queueWait = 5 * time.Second

// Run is Start for a caller that waits for the answer anyway (a plain HTTP
// call): it registers the call and runs it on the caller's goroutine, returning
// once it has ended ([Call.Final] then has its answer). The call is the
// registry's as with Start: it does not depend on ctx, which only bounds the
// registration, and others see, follow and cancel it while it runs. What it
// saves is the handoff to a goroutine of the call's own and back, on the path of
// every call.
func (r *Registry) Run(ctx context.Context, req api.Request) (*Call, error) {
	c, callCtx, err := r.register(ctx, req)
	if err != nil {
		return nil, err
	}
	r.run(callCtx, c)
	return c, nil
}

// register validates req and registers its call, counted in r.wg until run
// ends it.
func (r *Registry) register(ctx context.Context, req api.Request) (*Call, context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if err := r.runner.Validate(req); err != nil {
		return nil, nil, fmt.Errorf("start call: %w", err)
	}
	callCtx, cancel := context.WithCancel(context.Background())
	c := &Call{
		req: req, created: time.Now(), cancel: cancel, done: make(chan struct{}),
		state: api.CallQueued,
	}
	c.log = newEventLog(r.o.MaxLogBytes, r.grow)
	r.mu.Lock()
	r.tidyLocked(c.created)
	if r.closed {
		r.mu.Unlock()
		cancel()
		return nil, nil, fmt.Errorf("start call: %w", api.ErrClosed)
	}
	r.last++
	c.id = r.prefix + strconv.FormatInt(r.last, 10)
	r.calls[c.id] = c
	r.wg.Add(1)
	r.mu.Unlock()
	r.journalLine(journalEntry{Op: "+", ID: c.id, Session: req.SessionID, Code: clipCode(req.Code), Created: c.created})
	return c, callCtx, nil
}

// run runs one call: on its own goroutine (Start) or its caller's (Run).
func (r *Registry) run(ctx context.Context, c *Call) {
	defer r.wg.Done()
	defer c.cancel()
	res, err := r.runner.ExecuteStream(ctx, c.req, c.onEvent)
	var size int64
	if res != nil {
		res, size = slim(res, r.o.MaxResultBytes)
	}
	r.o.Logger.Debug("call finished", "call", c.id, "session", c.req.SessionID, "err", err, "result_bytes", size)
	defer r.journalLine(journalEntry{Op: "-", ID: c.id}) // after mu is let go: a rewrite takes it
	r.mu.Lock()
	defer r.mu.Unlock()
	// Done and the bookkeeping in one step: a caller that starts its next call
	// once this one is done finds it counted, and finished stays in end order.
	c.finish(res, size, err)
	r.finished = append(r.finished, c)
	r.results += size
	for len(r.finished) > r.o.MaxCalls {
		r.dropLocked(r.finished[0], "max calls")
	}
	r.tidyLocked(time.Now())
}

// Get returns the call with id. It returns api.ErrCallExpired for a call this
// registry dropped (retention), api.ErrNotFound for an id it never gave out
// (including ids of another server run).
func (r *Registry) Get(id string) (*Call, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tidyLocked(time.Now())
	if c, ok := r.calls[id]; ok {
		return c, nil
	}
	if n, ok := strings.CutPrefix(id, r.prefix); ok {
		if k, err := strconv.ParseInt(n, 10, 64); err == nil && k > 0 && k <= r.last && n == strconv.FormatInt(k, 10) {
			return nil, fmt.Errorf("call %s: %w (kept %s after it ended, at most %d finished calls)", id, api.ErrCallExpired, r.o.Retention, r.o.MaxCalls)
		}
	}
	return nil, fmt.Errorf("call %q: %w", id, api.ErrNotFound)
}

// List returns the calls of a session, newest first.
func (r *Registry) List(session string) []*Call {
	r.mu.Lock()
	r.tidyLocked(time.Now())
	var out []*Call
	for _, c := range r.calls {
		if c.req.SessionID == session {
			out = append(out, c)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b *Call) int {
		if c := b.created.Compare(a.created); c != 0 {
			return c
		}
		return strings.Compare(b.id, a.id)
	})
	return out
}

// Cancel interrupts the call with id; see [Call.Cancel].
func (r *Registry) Cancel(id string) error {
	c, err := r.Get(id)
	if err != nil {
		return err
	}
	return c.Cancel()
}

// Close refuses new calls, cancels the calls still queued or running (their
// answers say so) and waits for every goroutine of the registry to end.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.wg.Wait()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.StopJournal()
	r.mu.Lock()
	for _, c := range r.calls {
		c.cancel()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

// grow is every log's byte accounting. It runs on a call's event path, so it
// only counts: the bound is enforced by tidyLocked.
func (r *Registry) grow(delta int64) { r.total.Add(delta) }

// TotalLogBytes returns the bytes held by the logs of all kept calls.
func (r *Registry) TotalLogBytes() int64 { return r.total.Load() }

// TotalResultBytes returns the bytes held by the Results of all kept finished
// calls, as the Result bounds count them.
func (r *Registry) TotalResultBytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.results
}

// tidyLocked drops the calls past their retention and empties the oldest
// finished logs while the total is over its bound.
func (r *Registry) tidyLocked(now time.Time) {
	for len(r.finished) > 0 && now.Sub(r.finished[0].finishedAt()) > r.o.Retention {
		r.dropLocked(r.finished[0], "retention")
	}
	r.trimTotalLocked()
	r.trimResultsLocked()
}

// trimResultsLocked evicts the Result bodies of the oldest finished calls while
// their total is over its bound; the newest finished call keeps its Result. An
// evicted call's log is emptied too: its display events share the Result's
// data, so keeping them would keep the memory the eviction is for (readers
// are told what is gone, as for the total log bound).
func (r *Registry) trimResultsLocked() {
	for _, c := range r.finished[:max(0, len(r.finished)-1)] {
		if r.results <= r.o.MaxTotalResultBytes {
			return
		}
		if freed := c.evict(r.o.MaxTotalResultBytes); freed > 0 {
			r.results -= freed
			logFreed := c.log.dropAll()
			r.total.Add(-logFreed)
			r.o.Logger.Debug("call result evicted", "call", c.id, "bytes", freed, "log_bytes", logFreed, "reason", "total result bytes")
		}
	}
}

// trimTotalLocked empties the logs of the oldest finished calls while the total is
// over its bound; their Results stay.
func (r *Registry) trimTotalLocked() {
	for _, c := range r.finished {
		if r.total.Load() <= r.o.MaxTotalLogBytes {
			return
		}
		if freed := c.log.dropAll(); freed > 0 {
			r.total.Add(-freed)
			r.o.Logger.Debug("call log dropped", "call", c.id, "bytes", freed, "reason", "total log bytes")
		}
	}
}

// dropLocked forgets a finished call (the oldest, finished[0]).
func (r *Registry) dropLocked(c *Call, reason string) {
	r.finished = r.finished[1:]
	delete(r.calls, c.id)
	_, held, _, _ := c.log.stats()
	r.total.Add(-held)
	r.results -= c.keptBytes()
	r.o.Logger.Debug("call expired", "call", c.id, "session", c.req.SessionID, "reason", reason)
}
