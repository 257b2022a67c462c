package egress

import (
	"fmt"
	"sync"
)

// Limiter bounds the client connections of every proxy that shares it (all of a
// server's sessions), from the moment each is accepted until it ends: a
// connection holds at most two descriptors (the client's and the one to the
// server), so a Limiter of Max connections holds at most 2×Max descriptors,
// whatever the kernels do; the server keeps the rest for its own API and files.
// One proxy holds at most PerSession of them, so that one session's kernel
// cannot take the share of the others. It is safe for concurrent use.
type Limiter struct {
	max, per int
	mu       sync.Mutex
	used     int
	refused  int64
}

// NewLimiter returns a limiter of max connections, at most perSession of them
// for one proxy; perSession <= 0 means max/4 (at least 1).
func NewLimiter(conns, perSession int) *Limiter {
	conns = max(conns, 1)
	if perSession <= 0 {
		perSession = conns / 4
	}
	return &Limiter{max: conns, per: min(max(perSession, 1), conns)}
}

// LimiterStats is a Limiter's state.
type LimiterStats struct {
	// Max and PerSession are the limiter's bounds; Used the connections held now.
	Max, PerSession, Used int
	// Refused counts the connections refused because all Max were held.
	Refused int64
}

// Stats returns the limiter's state.
func (l *Limiter) Stats() LimiterStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LimiterStats{Max: l.max, PerSession: l.per, Used: l.used, Refused: l.refused}
}

// perSession is the most connections one proxy may hold; a nil Limiter has no bound.
func (l *Limiter) perSession() int {
	if l == nil {
		return int(^uint(0) >> 1)
	}
	return l.per
}

// take holds one connection, or returns the refusal when all are held.
func (l *Limiter) take() (Decision, bool) {
	if l == nil {
		return Decision{}, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.used >= l.max {
		l.refused++
		return deny("server connection limit", fmt.Sprintf("the server's egress proxies hold %d connections, all they may (kept for the server's own API and its other sessions); retry later", l.max)), false
	}
	l.used++
	return Decision{}, true
}

// give returns a connection taken.
func (l *Limiter) give() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.used--
	l.mu.Unlock()
}
