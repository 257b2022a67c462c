package egress

import "sync"

// Budget is what one session has spent of its byte limit (Policy.MaxBytes) over
// its life. A session's proxy may be replaced — a new kernel or container after
// a reset, a crash or a hibernation, a warm kernel taken, a kernel adopted by a
// restarted kernelbox — and every proxy that serves the session in turn spends
// from the same Budget ([Options.Budget], [Proxy.Adopt]), so that a kernel cannot
// win a fresh allowance by getting itself replaced. It is safe for concurrent
// use; the zero value has spent nothing.
type Budget struct {
	mu   sync.Mutex
	used int64
}

// NewBudget returns a budget that has already spent used bytes (one read back
// from where a session's owner kept it).
func NewBudget(used int64) *Budget { return &Budget{used: max(used, 0)} }

// Used returns the bytes spent.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// spend counts n bytes against limit; false (and the budget marked spent) when
// they would pass it.
func (b *Budget) spend(n, limit int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > limit {
		b.used = max(b.used, limit)
		return false
	}
	b.used += n
	return true
}

// spent reports whether nothing is left of limit.
func (b *Budget) spent(limit int64) bool { return b.Used() >= limit }
