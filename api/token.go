package api

import "time"

// TokenScope is what a scoped token may do (see tokens.Scope, which it
// mirrors on the wire).
type TokenScope struct {
	// Sessions: exact ids, prefixes ending in '*', or "*".
	Sessions  []string `json:"sessions"`
	Templates []string `json:"templates,omitempty"`
	// Ops: watch, execute, files, hibernate, fork, close (all when empty).
	Ops           []string `json:"ops,omitempty"`
	MaxSessions   int      `json:"max_sessions,omitempty"`
	RatePerMinute int      `json:"rate_per_minute,omitempty"`
}

// CreateTokenBody is the body of POST /v1/tokens: a name, a scope (its fields
// flat in the body) and a time to live (0: until revoked).
type CreateTokenBody struct {
	Name string `json:"name"`
	TokenScope
	TTLSeconds int64 `json:"ttl_seconds,omitempty"`
}

// TokenInfo is a scoped token as GET /v1/tokens lists it: never its secret.
type TokenInfo struct {
	ID       string     `json:"id"`
	Name     string     `json:"name"`
	Scope    TokenScope `json:"scope"`
	Created  time.Time  `json:"created"`
	Expires  time.Time  `json:"expires,omitzero"`
	LastUsed time.Time  `json:"last_used,omitzero"`
	// Sessions is how many sessions the token owns (live and hibernated).
	Sessions int `json:"sessions"`
}

// CreatedToken is the answer of POST /v1/tokens (201): the token and its
// secret, shown this once.
type CreatedToken struct {
	TokenInfo
	Token string `json:"token"`
}

// WhoAmI is the answer of GET /v1/token: who the request's token is. Admin
// tokens have ID "admin" and no scope.
type WhoAmI struct {
	ID    string      `json:"id"`
	Name  string      `json:"name"`
	Admin bool        `json:"admin"`
	Scope *TokenScope `json:"scope,omitempty"`
	// Expires is zero for a token without a TTL.
	Expires time.Time `json:"expires,omitzero"`
}
