package tokens

import (
	"math"
	"time"
)

// bucket is a token's call rate: RatePerMinute calls in a bucket that refills
// continuously.
type bucket struct {
	level float64
	last  time.Time
	init  bool
}

// take spends one call of a bucket of rate per minute at now, or returns how
// long until one is there.
func (b *bucket) take(rate int, now time.Time) (time.Duration, bool) {
	if !b.init {
		b.level, b.last, b.init = float64(rate), now, true
	}
	perSec := float64(rate) / 60
	b.level = math.Min(float64(rate), b.level+now.Sub(b.last).Seconds()*perSec)
	b.last = now
	if b.level >= 1 {
		b.level--
		return 0, true
	}
	return time.Duration((1 - b.level) / perSec * float64(time.Second)), false
}

// Allow spends one call of p's rate (Scope.RatePerMinute), or returns how
// long until the next is allowed. The admin and tokens without a rate are
// always allowed.
func (s *Store) Allow(p *Principal) (time.Duration, bool) {
	if p.IsAdmin() || p.tok.Scope.RatePerMinute <= 0 {
		return 0, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.tokens[p.tok.ID]
	if e == nil {
		return 0, true // revoked since: its requests end anyway
	}
	return e.bucket.take(p.tok.Scope.RatePerMinute, s.o.Now())
}

// maxCallsKept bounds the calls a token's entry remembers for revocation.
const maxCallsKept = 256

// NoteCall remembers that p started call id, so that revoking p cancels it.
func (s *Store) NoteCall(p *Principal, id string) {
	if p.IsAdmin() || id == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.tokens[p.tok.ID]; e != nil {
		if len(e.calls) >= maxCallsKept {
			e.calls = e.calls[1:]
		}
		e.calls = append(e.calls, id)
	}
}
