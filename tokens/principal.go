package tokens

import (
	"context"
	"time"
)

// Principal is who a request comes from: the admin (the server's own token)
// or one scoped token. It is a snapshot, safe to share; the Store decides
// anything that depends on the sessions' owners.
type Principal struct {
	admin bool
	tok   Token
	// done ends, with the revocation as its cause, when the token is revoked.
	done context.Context
}

// Admin is the principal of the admin token: every route, every session.
var Admin = &Principal{admin: true, done: context.Background()}

// IsAdmin reports whether p is the admin.
func (p *Principal) IsAdmin() bool { return p == nil || p.admin }

// ID is the token's id ("admin" for the admin).
func (p *Principal) ID() string {
	if p.IsAdmin() {
		return "admin"
	}
	return p.tok.ID
}

// Name is the token's name ("admin" for the admin).
func (p *Principal) Name() string {
	if p.IsAdmin() {
		return "admin"
	}
	return p.tok.Name
}

// Token returns the scoped token's record (the zero Token for the admin).
func (p *Principal) Token() Token {
	if p.IsAdmin() {
		return Token{}
	}
	return p.tok
}

// Scope returns the token's scope; the admin's is everything.
func (p *Principal) Scope() Scope {
	if p.IsAdmin() {
		return Scope{Sessions: []string{"*"}, Ops: AllOps}
	}
	return p.tok.Scope
}

// Revoked returns a context that ends when the token is revoked (never for
// the admin); its cause says so.
func (p *Principal) Revoked() context.Context {
	if p.IsAdmin() {
		return context.Background()
	}
	return p.done
}

// Allows reports whether p may do ops.
func (p *Principal) Allows(ops ...Op) bool { return p.IsAdmin() || p.tok.Scope.Allows(ops...) }

// MaySee reports whether p may see session id whose owner is owner ("" for a
// session no scoped token created): the admin sees all; a scoped token the
// sessions its patterns match that no other scoped token owns.
func (p *Principal) MaySee(id, owner string) bool {
	if p.IsAdmin() {
		return true
	}
	return p.tok.Scope.Matches(id) && (owner == "" || owner == p.tok.ID)
}

// principalKey is the context key of a request's Principal.
type principalKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal ctx carries, or Admin when it carries
// none: a front end that serves without tokens (the stdio MCP server, a
// library user) is its operator's.
func FromContext(ctx context.Context) *Principal {
	if p, ok := ctx.Value(principalKey{}).(*Principal); ok && p != nil {
		return p
	}
	return Admin
}

// expired reports whether t has expired at now.
func (t Token) expired(now time.Time) bool { return !t.Expires.IsZero() && !now.Before(t.Expires) }
