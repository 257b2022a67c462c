package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/tokens"
)

// The scope columns of the route table, decided by the guard (scopeCheck)
// for a request with a scoped token (docs/security.md, "Scoped tokens"). No
// handler checks a scope; handlers that list (sessions, the gateway's
// kernels, MCP's tools) show what tokens.FromContext may see.

// Target says where a route's session is, for the guard to check it against
// a scoped token's reach.
type Target int

const (
	// NoTarget routes name no session (lists filter what they show).
	NoTarget Target = iota
	// PathID: the {id} wildcard.
	PathID
	// PathSession: the {session} wildcard (artifacts).
	PathSession
	// CallID: the session of the call in the {call_id} wildcard.
	CallID
	// BodyID: the "id" field of the JSON body (POST /v1/sessions).
	BodyID
)

// Creates says what session a route may create, for the guard to claim it
// for a scoped token (its owner) before the handler runs.
type Creates int

const (
	// CreatesNothing: the route creates no session.
	CreatesNothing Creates = iota
	// CreatesTarget: the route's target session, when it does not exist
	// (execute, an upload, POST /v1/sessions).
	CreatesTarget
	// CreatesBodyID: the session in the body's "id" (fork's new session).
	CreatesBodyID
)

// idBody is what the guard reads of a body: a session id and a template.
type idBody struct {
	ID       string `json:"id"`
	Template string `json:"template"`
}

// scoped is what scopeCheck found, for after the handler.
type scoped struct {
	session string // the target session, "" when none
	claimed string // a session the guard claimed for the token, "" when none
}

// refusal is a guard's refusal: the status, code and message of the answer.
type refusal struct {
	status int
	err    error
	retry  int // Retry-After seconds, for 429 rate_limited
}

// scopeCheck checks a scoped principal's request against its route rt (nil
// when no route matched), and claims the session the request creates. The
// order: a route that is the admin's is 403; an op out of scope 403; a call
// over the token's rate 429 with Retry-After; a session out of reach 404,
// worded as the executor words a missing one; a template out of scope 403; a
// creation past max_sessions 429.
func (h *handler) scopeCheck(r *http.Request, rt *row, p *tokens.Principal) (scoped, *refusal) {
	var sc scoped
	if rt == nil {
		return sc, nil // no route: the answer is 404 or a redirect, which shows nothing
	}
	if !rt.Scoped {
		return sc, &refusal{status: http.StatusForbidden, err: fmt.Errorf("%w: %s needs the admin token; token %q is a scoped token", api.ErrDenied, rt.Pattern, p.Name())}
	}
	if !p.Allows(rt.Ops...) {
		return sc, &refusal{status: http.StatusForbidden, err: fmt.Errorf("%w: token %q's scope does not allow %s (ops %v)", api.ErrDenied, p.Name(), opsOf(rt.Ops), p.Scope().Ops)}
	}
	if rt.Counted {
		if wait, ok := h.o.Tokens.Allow(p); !ok {
			secs := int(wait.Seconds()) + 1
			return sc, &refusal{status: http.StatusTooManyRequests, retry: secs,
				err: fmt.Errorf("%w: token %q may make %d calls a minute (rate_per_minute); retry in %d s", api.ErrRateLimited, p.Name(), p.Scope().RatePerMinute, secs)}
		}
	}
	var body idBody
	if rt.Target == BodyID || rt.Creates == CreatesBodyID {
		b, err := peekBody(r, h.o.MaxBodyBytes)
		if err != nil {
			return sc, &refusal{status: http.StatusBadRequest, err: err}
		}
		body = b
	}
	id, ref := h.target(r, rt, body)
	if ref != nil {
		return sc, ref
	}
	sc.session = id
	if id == "" {
		return sc, nil
	}
	if err := h.o.Tokens.Access(p, id); err != nil {
		return sc, notFound(err)
	}
	return sc, h.claim(r, rt, p, id, body, &sc)
}

// claim claims for p the session r creates, if it does not exist: after
// checking that p may create it (its id and its template in scope) and may
// own one more (max_sessions).
func (h *handler) claim(r *http.Request, rt *row, p *tokens.Principal, id string, body idBody, sc *scoped) *refusal {
	newID := id
	switch rt.Creates {
	case CreatesNothing:
		return nil
	case CreatesBodyID:
		newID = body.ID
		if err := h.o.Tokens.Access(p, newID); err != nil || !api.ValidSessionID(newID) {
			if err == nil {
				return nil // the handler refuses an invalid id
			}
			return notFound(err)
		}
	}
	if h.exists(newID) {
		return nil // its owner was checked
	}
	template := body.Template
	switch {
	case rt.Creates == CreatesBodyID:
		if h.e != nil {
			if info, err := h.e.Session(id); err == nil {
				template = info.Template // a fork keeps its source's template
			}
		}
	case rt.JSON && rt.Target != BodyID:
		b, err := peekBody(r, h.o.MaxBodyBytes) // execute: its "template"
		if err != nil {
			return &refusal{status: http.StatusBadRequest, err: err}
		}
		template = b.Template
	}
	if h.e != nil {
		template = h.e.TemplateFor(newID, template) // a retired session's own
	} else if template == "" {
		template = api.DefaultTemplateName
	}
	if !p.Scope().AllowsTemplate(template) {
		return &refusal{status: http.StatusForbidden, err: fmt.Errorf("%w: token %q may create sessions from the templates %v only, not %q", api.ErrDenied, p.Name(), p.Scope().Templates, template)}
	}
	claimed, err := h.o.Tokens.Claim(p, newID)
	if err != nil {
		if errors.Is(err, api.ErrNotFound) {
			return notFound(err)
		}
		status, _ := classify(err)
		return &refusal{status: status, err: err}
	}
	if claimed {
		sc.claimed = newID
	}
	return nil
}

// notFound is the refusal of a session out of reach.
func notFound(err error) *refusal { return &refusal{status: http.StatusNotFound, err: err} }

// exists reports whether session id exists (live or hibernated), as the
// token store is told (tokens.Options.Exists).
func (h *handler) exists(id string) bool { return h.o.Tokens.Exists(id) }

// target returns the session r's route names, "" when none.
func (h *handler) target(r *http.Request, rt *row, body idBody) (string, *refusal) {
	switch rt.Target {
	case PathID:
		return pathValue(rt.Pattern, r, "id"), nil
	case PathSession:
		return pathValue(rt.Pattern, r, "session"), nil
	case BodyID:
		return body.ID, nil
	case CallID:
		id := pathValue(rt.Pattern, r, "call_id")
		c, err := h.calls.Get(id)
		if err != nil {
			return "", nil // the handler answers an unknown call
		}
		if s := c.SessionID(); s != "" {
			if err := h.o.Tokens.Access(tokens.FromContext(r.Context()), s); err != nil {
				// The answer to a call id never given out, word for word.
				return "", notFound(fmt.Errorf("call %q: %w", id, api.ErrNotFound))
			}
			return s, nil
		}
	}
	return "", nil
}

// peekBody reads r's JSON body (at most limit bytes) for its "id" and
// "template", and puts it back for the handler.
func peekBody(r *http.Request, limit int64) (idBody, error) {
	var b idBody
	if r.Body == nil || r.Body == http.NoBody {
		return b, nil
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	r.Body = io.NopCloser(bytes.NewReader(raw))
	if err != nil {
		return b, fmt.Errorf("%w: body: %v", api.ErrInvalidRequest, err)
	}
	if int64(len(raw)) > limit {
		return b, fmt.Errorf("%w: request body over %d bytes", api.ErrInvalidRequest, limit)
	}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &b); err != nil {
			return b, fmt.Errorf("%w: body: %v", api.ErrInvalidRequest, err)
		}
	}
	return b, nil
}

// pathValue returns the wildcard name of pattern in r's path (the guard runs
// before the mux sets path values).
func pathValue(pattern string, r *http.Request, name string) string {
	_, p, _ := strings.Cut(pattern, " ")
	pats := strings.Split(strings.TrimPrefix(p, "/"), "/")
	segs := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	for i, ps := range pats {
		if i >= len(segs) {
			return ""
		}
		if ps == "{"+name+"}" {
			v, err := url.PathUnescape(segs[i])
			if err != nil {
				return segs[i]
			}
			return v
		}
	}
	return ""
}

// opsOf names ops for a message.
func opsOf(ops []tokens.Op) string {
	s := make([]string, len(ops))
	for i, op := range ops {
		s[i] = strconv.Quote(string(op))
	}
	return strings.Join(s, " and ")
}
