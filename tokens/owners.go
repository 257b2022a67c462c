package tokens

import (
	"fmt"
	"slices"
	"time"

	"github.com/kernelbox/kernelbox/api"
)

// A session belongs to the scoped token that created it: the store keeps
// session id -> token id, sealed on disk like the tokens, so that it survives
// a restart, an adoption and a hibernation whatever the executor keeps. A
// session the admin created has no record: it is anybody's whose patterns
// match it. A record outlives its session: what a closed session leaves (its
// artifacts, its calls in the registry) stays its owner's, and its id stays
// out of other tokens' reach. Only a claim whose creation failed is dropped
// (Settle), and, past maxOwners, the oldest records of sessions that
// no longer exist.

// owner is one session's owner.
type owner struct {
	token string
	since time.Time
	made  bool // its session was created (Settle saw it)
}

// ownerEntry is an owner on disk.
type ownerEntry struct {
	Session string    `json:"session"`
	Token   string    `json:"token"`
	Since   time.Time `json:"since"`
	Made    bool      `json:"made,omitempty"`
	MAC     string    `json:"mac,omitempty"`
}

// claimGrace is how long a claim holds before its session exists: the
// creation that claimed it is under way.
const claimGrace = time.Minute

// maxOwners bounds the owner records (stale ones are dropped first).
const maxOwners = 100_000

// NotFound is the error of a session out of a token's reach: the executor's
// own answer for a session that does not exist, word for word.
func NotFound(id string) error { return fmt.Errorf("no such session %q: %w", id, api.ErrNotFound) }

// Owner returns the id of the token that owns session id, or "" (the admin's
// or nobody's).
func (s *Store) Owner(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ownerLocked(id, s.o.Now())
}

// ownerLocked is Owner with s.mu held.
func (s *Store) ownerLocked(id string, _ time.Time) string {
	return s.owners[id].token
}

// liveLocked reports whether session id counts against its owner's
// max_sessions: it exists (live or hibernated), or its creation is under way.
func (s *Store) liveLocked(id string, o owner, now time.Time) bool {
	return s.o.Exists(id) || (!o.made && now.Sub(o.since) <= claimGrace)
}

// Access returns nil when p may touch session id (which may not exist),
// else NotFound(id): never another answer, so that a token learns nothing of
// the sessions out of its reach.
func (s *Store) Access(p *Principal, id string) error {
	if p.IsAdmin() {
		return nil
	}
	if !p.MaySee(id, s.Owner(id)) {
		return NotFound(id)
	}
	return nil
}

// Claim makes p the owner of session id before a request creates it, and
// reports whether it did (false: the session exists or is p's already). It
// refuses, as Access does, an id out of p's reach, and a token at its
// MaxSessions (live, hibernated and being created, counted together) with
// ErrTooManySessions naming the limit. Call Release if the creation failed.
func (s *Store) Claim(p *Principal, id string) (bool, error) {
	if p.IsAdmin() {
		return false, nil
	}
	if !p.tok.Scope.Matches(id) {
		return false, NotFound(id)
	}
	exists := s.o.Exists(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Now()
	switch cur := s.ownerLocked(id, now); {
	case cur == p.tok.ID:
		return false, nil
	case cur != "":
		return false, NotFound(id)
	case exists:
		return false, nil // the admin's: p may touch it, but does not own it
	}
	if max := p.tok.Scope.MaxSessions; max > 0 {
		if n := s.ownedLocked(p.tok.ID, now); n >= max {
			return false, fmt.Errorf("%w: token %q may own at most %d sessions (max_sessions), live and hibernated; it owns %d: close one first", api.ErrTooManySessions, p.tok.Name, max, n)
		}
	}
	if len(s.owners) >= maxOwners && !s.pruneLocked(now) {
		return false, fmt.Errorf("%w: the server keeps at most %d session owners, all of live sessions", api.ErrTooManySessions, maxOwners)
	}
	s.owners[id] = owner{token: p.tok.ID, since: now.UTC()}
	if err := s.saveLocked(); err != nil {
		delete(s.owners, id)
		return false, err
	}
	return true, nil
}

// ownedLocked counts the sessions token owns, those being created included.
func (s *Store) ownedLocked(token string, now time.Time) int {
	n := 0
	for id, o := range s.owners {
		if o.token == token && s.liveLocked(id, o, now) {
			n++
		}
	}
	return n
}

// pruneLocked drops the oldest tenth of the records of sessions that no
// longer exist, to make room; it reports whether it dropped any. Their ids
// (and what their sessions left) become reachable by matching patterns again,
// so it says so in the log.
func (s *Store) pruneLocked(now time.Time) bool {
	var gone []string
	for id, o := range s.owners {
		if !s.liveLocked(id, o, now) {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return false
	}
	slices.SortFunc(gone, func(a, b string) int { return s.owners[a].since.Compare(s.owners[b].since) })
	gone = gone[:max(1, len(gone)/10)]
	for _, id := range gone {
		delete(s.owners, id)
	}
	s.o.Logger.Warn("tokens: forgot the owners of closed sessions to make room", "sessions", len(gone), "max", maxOwners)
	return true
}

// OwnedBy counts the sessions the token id owns.
func (s *Store) OwnedBy(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ownedLocked(id, s.o.Now())
}

// Owned returns the ids of the sessions the token id owns.
func (s *Store) Owned(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	now := s.o.Now()
	for sid, o := range s.owners {
		if o.token == id && s.liveLocked(sid, o, now) {
			out = append(out, sid)
		}
	}
	return out
}

// Release forgets session id's owner.
func (s *Store) Release(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.owners[id]; !ok {
		return
	}
	delete(s.owners, id)
	if err := s.saveLocked(); err != nil {
		s.o.Logger.Warn("tokens: forgetting a session's owner", "session", id, "err", err)
	}
}

// Exists reports whether session id exists, as Options.Exists says: the
// one answer the guard's decisions use.
func (s *Store) Exists(id string) bool { return s.o.Exists(id) }

// Settle is told when a request that claimed session id has ended: the
// session exists (its record is kept, marked made) or its creation failed
// (the claim is dropped).
func (s *Store) Settle(id string) {
	if !s.o.Exists(id) {
		s.Release(id)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.owners[id]; ok && !o.made {
		o.made = true
		s.owners[id] = o
		if err := s.saveLocked(); err != nil {
			s.o.Logger.Warn("tokens: keeping a session's owner", "session", id, "err", err)
		}
	}
}
