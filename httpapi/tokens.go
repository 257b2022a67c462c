package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/tokens"
)

// tokenRoutes are the scoped tokens' routes (docs/security.md): minting,
// listing and revoking are the admin's; a scoped token may only ask who it is.
// A scoped token cannot mint (not even a narrower token): an agent that could
// would hand keys on to whatever injected it, beyond the operator's sight.
func (h *handler) tokenRoutes() []row {
	if h.o.Tokens == nil {
		return nil
	}
	return []row{
		{Route{Pattern: "POST /v1/tokens", JSON: true}, h.mintToken},
		{Route{Pattern: "GET /v1/tokens"}, h.listTokens},
		{Route{Pattern: "DELETE /v1/tokens/{token_id}"}, h.revokeToken},
		{Route{Pattern: "GET /v1/token", Scoped: true}, h.whoAmI},
	}
}

// maxTTL bounds ttl_seconds (ten years).
const maxTTL = 10 * 365 * 24 * time.Hour

func (h *handler) mintToken(w http.ResponseWriter, r *http.Request) {
	if h.o.Token == "" {
		// Without a token every request is the admin's (a unix socket): a
		// scoped token would confine nothing.
		writeErr(w, fmt.Errorf("%w: this server takes no token (a unix socket: every client is the admin), so a scoped token would confine nothing; serve agents on a TCP listener", api.ErrInvalidRequest))
		return
	}
	var b api.CreateTokenBody
	if err := decode(r, &b); err != nil {
		writeErr(w, err)
		return
	}
	if b.TTLSeconds < 0 || time.Duration(b.TTLSeconds) > maxTTL/time.Second {
		writeErr(w, fmt.Errorf("%w: ttl_seconds must be between 0 (no expiry) and %d", api.ErrInvalidRequest, int64(maxTTL/time.Second)))
		return
	}
	t, secret, err := h.o.Tokens.Mint(b.Name, scopeFrom(b.TokenScope), time.Duration(b.TTLSeconds)*time.Second)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.CreatedToken{TokenInfo: h.tokenInfo(t), Token: secret})
}

func (h *handler) listTokens(w http.ResponseWriter, r *http.Request) {
	list := h.o.Tokens.List()
	out := make([]api.TokenInfo, len(list))
	for i, t := range list {
		out[i] = h.tokenInfo(t)
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": out})
}

// revokeToken deletes a token at once and cancels the calls it has running:
// its open requests and WebSockets end with "token ... was revoked".
func (h *handler) revokeToken(w http.ResponseWriter, r *http.Request) {
	t, started, err := h.o.Tokens.Revoke(r.PathValue("token_id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	// The calls it started that the guard saw the id of, and any call
	// running in a session it owns (a plain execute's id is known only when
	// it ends).
	for _, sid := range h.o.Tokens.Owned(t.ID) {
		for _, c := range h.calls.List(sid) {
			if !isDone(c) {
				started = append(started, c.ID())
			}
		}
	}
	for _, id := range started {
		_ = h.calls.Cancel(id) // one that has ended answers call_finished
	}
	h.log.Info("token revoked", "token_id", t.ID, "name", t.Name, "calls_cancelled", len(started))
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) whoAmI(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	if p.IsAdmin() {
		writeJSON(w, http.StatusOK, api.WhoAmI{ID: "admin", Name: "admin", Admin: true})
		return
	}
	t := p.Token()
	sc := scopeOf(t.Scope)
	writeJSON(w, http.StatusOK, api.WhoAmI{ID: t.ID, Name: t.Name, Scope: &sc, Expires: t.Expires})
}

func (h *handler) tokenInfo(t tokens.Token) api.TokenInfo {
	return api.TokenInfo{ID: t.ID, Name: t.Name, Scope: scopeOf(t.Scope), Created: t.Created, Expires: t.Expires,
		LastUsed: t.LastUsed, Sessions: h.o.Tokens.OwnedBy(t.ID)}
}

func scopeFrom(s api.TokenScope) tokens.Scope {
	ops := make([]tokens.Op, len(s.Ops))
	for i, op := range s.Ops {
		ops[i] = tokens.Op(op)
	}
	return tokens.Scope{Sessions: s.Sessions, Templates: s.Templates, Ops: ops, MaxSessions: s.MaxSessions, RatePerMinute: s.RatePerMinute}
}

func scopeOf(s tokens.Scope) api.TokenScope {
	ops := make([]string, len(s.Ops))
	for i, op := range s.Ops {
		ops[i] = string(op)
	}
	return api.TokenScope{Sessions: s.Sessions, Templates: s.Templates, Ops: ops, MaxSessions: s.MaxSessions, RatePerMinute: s.RatePerMinute}
}
