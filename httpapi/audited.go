package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/audit"
	"github.com/kernelbox/kernelbox/tokens"
)

// recorder is a ResponseWriter that remembers the status of the answer, for
// the audit log and for what the guard does after a scoped token's request.
// It passes Flush, Hijack and the ResponseController's calls through.
type recorder struct {
	http.ResponseWriter
	h      *handler
	r      *http.Request
	rt     *row
	status int
	wrote  bool
	onHead func(*recorder) // called once, before the header goes out
}

// recorder returns a recorder for r when the audit log or the token store is
// on, else nil (the handler is served as is).
func (h *handler) recorder(w http.ResponseWriter, r *http.Request, rt *row) *recorder {
	if h.o.Audit == nil && h.o.Tokens == nil {
		return nil
	}
	return &recorder{ResponseWriter: w, h: h, r: r, rt: rt}
}

func (rc *recorder) WriteHeader(status int) {
	if !rc.wrote {
		rc.wrote, rc.status = true, status
		if rc.onHead != nil {
			rc.onHead(rc)
		}
	}
	rc.ResponseWriter.WriteHeader(status)
}

func (rc *recorder) Write(b []byte) (int, error) {
	if !rc.wrote {
		rc.WriteHeader(http.StatusOK)
	}
	return rc.ResponseWriter.Write(b)
}

// Flush passes on to the connection (SSE).
func (rc *recorder) Flush() {
	if !rc.wrote {
		rc.WriteHeader(http.StatusOK)
	}
	if f, ok := rc.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack passes on to the connection (WebSocket upgrades).
func (rc *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := rc.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be hijacked")
	}
	if !rc.wrote {
		rc.wrote, rc.status = true, http.StatusSwitchingProtocols
	}
	return hj.Hijack()
}

// Unwrap lets http.ResponseController reach the connection.
func (rc *recorder) Unwrap() http.ResponseWriter { return rc.ResponseWriter }

// finish writes the request's audit line: every request that changes state,
// and every refusal (by the guard, or a handler's 401, 403, 404 or 429).
func (rc *recorder) finish(ad admission) {
	l := rc.h.o.Audit
	if l == nil {
		return
	}
	m := rc.r.Method
	refused := !ad.ok
	if !refused && (m == http.MethodGet || m == http.MethodHead) && !isRefusal(rc.status) {
		return
	}
	rec := audit.Record{Interface: "http", Method: m, Remote: rc.r.RemoteAddr, Status: rc.status, Session: ad.sc.session}
	if ad.p != nil {
		rec.TokenID, rec.TokenName = ad.p.ID(), ad.p.Name()
	}
	rec.Route = rc.r.URL.Path
	if rc.rt != nil {
		rec.Route = rc.rt.Pattern
		if rec.Session == "" {
			rec.Session = pathValue(rc.rt.Pattern, rc.r, "id")
		}
		if c := pathValue(rc.rt.Pattern, rc.r, "call_id"); c != "" {
			rec.Call = c
		}
	}
	if c := rc.Header().Get(CallIDHeader); c != "" {
		rec.Call = c
	}
	switch {
	case refused:
		rec.Outcome = "refused"
	case rc.status >= 400:
		rec.Outcome = "error"
	default:
		rec.Outcome = "ok"
	}
	l.Write(rec)
}

// isRefusal reports whether a handler's status refuses the caller.
func isRefusal(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusTooManyRequests:
		return true
	}
	return false
}

// after is run when a scoped token's request has been served: it remembers
// the call the request started (so that revoking the token cancels it),
// forgets the owner of a session the request failed to create,
// and tells a client whose request the revocation cut why. A closed
// session keeps its owner: what it left (artifacts, calls) stays its owner's.
func (h *handler) after(r *http.Request, w http.ResponseWriter, rec *recorder, ad admission) func() {
	p := ad.p
	if rec != nil {
		rec.onHead = func(rc *recorder) { h.o.Tokens.NoteCall(p, rc.Header().Get(CallIDHeader)) }
	}
	return func() {
		ad.stop()
		revoked := context.Cause(r.Context())
		ad.cancel(nil)
		if s := ad.sc.claimed; s != "" {
			h.o.Tokens.Settle(s)
		}
		if rec == nil {
			return
		}
		if revoked == nil || p.Revoked().Err() == nil {
			return
		}
		switch {
		case !rec.wrote:
			writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, revoked.Error())
		case strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream"):
			fmt.Fprintf(w, "event: failed\ndata: {\"error\":{\"code\":%q,\"message\":%q},\"http_status\":401}\n\n", api.CodeUnauthorized, revoked.Error())
			rec.Flush()
		}
	}
}

// principalOf is the principal a request carries (the admin's when none).
func principalOf(r *http.Request) *tokens.Principal { return tokens.FromContext(r.Context()) }
