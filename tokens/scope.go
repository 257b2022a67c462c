package tokens

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kernelbox/kernelbox/api"
)

// Op is an operation a scope may allow. Seeing its own sessions (list, state,
// calls, events, artifacts) needs no op: every token may watch what it may
// touch; [OpWatch] alone makes a read-only observer.
type Op string

// The operations, as routes need them (httpapi's route table).
const (
	// OpWatch reads: sessions, calls, events, artifacts, a gateway kernel's
	// output. Always allowed; naming it alone makes a read-only token.
	OpWatch Op = "watch"
	// OpExecute runs code: execute (which creates a session), create,
	// interrupt, reset, cancel a call, type into a gateway kernel.
	OpExecute Op = "execute"
	// OpFiles reads and writes session files.
	OpFiles Op = "files"
	// OpHibernate hibernates and resumes.
	OpHibernate Op = "hibernate"
	// OpFork forks a session into a new one (whose id must be in scope too).
	OpFork Op = "fork"
	// OpClose closes (deletes) a session.
	OpClose Op = "close"
)

// AllOps are the operations, in the order documents list them. A scope that
// names none gets them all.
var AllOps = []Op{OpWatch, OpExecute, OpFiles, OpHibernate, OpFork, OpClose}

// Bounds of a scope, so that a token's record stays small.
const (
	MaxPatterns  = 64
	MaxTemplates = 64
	MaxNameLen   = 64
)

// Scope is what a token may do.
type Scope struct {
	// Sessions are the session ids the token may touch: an exact id ("a1"),
	// a prefix ending in '*' ("a1-*", matched on the whole id: "a1-x" but not
	// "a1x"), or "*" alone (any id). At least one. A session another scoped
	// token created stays out of reach even when it matches.
	Sessions []string `json:"sessions"`
	// Templates limits the templates of the sessions the token creates.
	// Defaults to any template.
	Templates []string `json:"templates,omitempty"`
	// Ops are the operations allowed. Defaults to all of them (AllOps).
	Ops []Op `json:"ops,omitempty"`
	// MaxSessions caps the sessions the token owns, live and hibernated
	// together; 0 is no cap of its own (the server's --max-sessions holds).
	MaxSessions int `json:"max_sessions,omitempty"`
	// RatePerMinute caps the calls (executions, MCP requests) the token
	// makes per minute, in a bucket of that many; 0 is no cap.
	RatePerMinute int `json:"rate_per_minute,omitempty"`
}

// Validate refuses a scope that cannot be enforced as written, and fills in
// the default ops.
func (s *Scope) Validate() error {
	if len(s.Sessions) == 0 {
		return fmt.Errorf("%w: scope: sessions must list at least one id, prefix ending in '*', or \"*\"", api.ErrInvalidRequest)
	}
	if len(s.Sessions) > MaxPatterns || len(s.Templates) > MaxTemplates {
		return fmt.Errorf("%w: scope: at most %d session patterns and %d templates", api.ErrInvalidRequest, MaxPatterns, MaxTemplates)
	}
	for _, p := range s.Sessions {
		if p == "*" {
			continue
		}
		id := strings.TrimSuffix(p, "*")
		if !api.ValidSessionID(id) {
			return fmt.Errorf("%w: scope: session pattern %q: an id (%s), such an id followed by '*', or \"*\"", api.ErrInvalidRequest, clip(p), api.SessionIDRule)
		}
	}
	for _, t := range s.Templates {
		if !api.ValidSessionID(t) {
			return fmt.Errorf("%w: scope: template %q is not a template name", api.ErrInvalidRequest, clip(t))
		}
	}
	if len(s.Ops) == 0 {
		s.Ops = slices.Clone(AllOps)
	}
	for _, op := range s.Ops {
		if !slices.Contains(AllOps, op) {
			return fmt.Errorf("%w: scope: op %q: want one of %v", api.ErrInvalidRequest, clip(string(op)), AllOps)
		}
	}
	if s.MaxSessions < 0 || s.RatePerMinute < 0 {
		return fmt.Errorf("%w: scope: max_sessions and rate_per_minute must not be negative", api.ErrInvalidRequest)
	}
	return nil
}

// Matches reports whether the scope's session patterns match id, a valid
// session id.
func (s Scope) Matches(id string) bool {
	if !api.ValidSessionID(id) {
		return false
	}
	for _, p := range s.Sessions {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(id, prefix) {
				return true
			}
		} else if p == id {
			return true
		}
	}
	return false
}

// AllowsTemplate reports whether a session the token creates may use the
// template named name.
func (s Scope) AllowsTemplate(name string) bool {
	return len(s.Templates) == 0 || slices.Contains(s.Templates, name)
}

// Allows reports whether the scope allows every op of ops; OpWatch always is.
func (s Scope) Allows(ops ...Op) bool {
	for _, op := range ops {
		if op != OpWatch && !slices.Contains(s.Ops, op) {
			return false
		}
	}
	return true
}

// clip shortens a client's string for an error message.
func clip(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
