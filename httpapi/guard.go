package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/origin"
	"github.com/kernelbox/kernelbox/tokens"
)

// ServeHTTP is the one guard: every request, whatever its route (one of the
// table's or none), is admitted by admit before a handler runs; what the
// request changed, and every refusal, goes to the audit log (audited.go).
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rt, r := h.match(r)
	rec := h.recorder(w, r, rt)
	if rec != nil {
		w = rec
	}
	ad := h.admit(w, r, rt)
	if ad.ok {
		r = ad.r
		if ad.p != nil && !ad.p.IsAdmin() {
			defer h.after(r, w, rec, ad)()
		}
		if rt != nil {
			h.mux.ServeHTTP(w, r)
		} else {
			h.noRoute(w, r)
		}
	}
	if rec != nil {
		rec.finish(ad)
	}
	h.log.Debug("http", "method", r.Method, "path", r.URL.Path, "duration", time.Since(start))
}

// admission is admit's verdict.
type admission struct {
	ok bool
	r  *http.Request     // the request to serve, carrying its Principal
	p  *tokens.Principal // nil when the token was missing or wrong
	sc scoped            // what the scope check found (scoped tokens)
	// cancel ends r's context (scoped tokens: linked to the revocation).
	cancel context.CancelCauseFunc
	stop   func() bool
}

// admit checks r against its route rt (nil when none matched) and answers the
// refusal itself, in this order:
//
//  1. the connection reserve: on a reserved connection, a request without a
//     valid token to a route that is not a Probe is 503 and its connection
//     closed;
//  2. the Host, against Options.Hosts (DNS rebinding): 403 forbidden_host;
//  3. the token (the admin's, or a live scoped token's), unless the route is
//     exempt: 401 unauthorized ("expired" for a token past its TTL);
//  4. a cross-site request that changes state (http.CrossOriginProtection:
//     Sec-Fetch-Site, else Origin against Host), or a WebSocket upgrade from
//     another origin: 403 cross_origin;
//  5. the content type of a body of a JSON route: 415;
//  6. for a scoped token, the route's scope columns (scope.go): 403 for a
//     route of the admin's or an op out of scope, 429 past the token's rate,
//     404 for a session out of its reach, as for a missing one;
//
// and then limits the body to the route's MaxBody.
func (h *handler) admit(w http.ResponseWriter, r *http.Request, rt *row) admission {
	if rt == nil {
		// A request that matches no route needs the token too, so that the
		// routes cannot be probed without it; its body limit is MaxBodyBytes.
		rt = &row{Route: Route{Access: NeedsToken}}
	}
	p, authErr := h.principal(r)
	tokenOK := p != nil
	switch {
	case !tokenOK && rt.Access != Probe && h.o.Reserve != nil && h.o.Reserve.Reserved(r):
		h.o.Reserve.Refused()
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, api.CodeTooManyConnections,
			"the server is near its connection limit (--max-conns); its last slots serve requests with the token and /healthz only")
		return admission{}
	case !h.hosts.allows(r.Host):
		writeError(w, http.StatusForbidden, api.CodeForbiddenHost, "Host "+quoteHost(r.Host)+" is not this server's: a loopback listener accepts localhost, 127.0.0.1 and [::1]; add other names with --allowed-host")
		return admission{}
	case !tokenOK && rt.Access == NeedsToken:
		w.Header().Set("WWW-Authenticate", `Bearer realm="kernelbox"`)
		msg := "missing or wrong bearer token"
		if errors.Is(authErr, tokens.ErrExpired) {
			msg = "the bearer token has expired: " + authErr.Error()
		}
		writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, msg)
		return admission{}
	}
	if err := h.csrf.Check(r); err != nil {
		writeError(w, http.StatusForbidden, api.CodeCrossOrigin, "cross-origin browser requests are refused: "+err.Error())
		return admission{}
	}
	if isUpgrade(r) && !origin.Same(r) {
		// A WebSocket upgrade is a GET, which CrossOriginProtection lets
		// through; a page of another origin must not open one.
		writeError(w, http.StatusForbidden, api.CodeCrossOrigin, "cross-origin WebSocket upgrades are refused: the Origin must be this server's")
		return admission{}
	}
	if rt.JSON && r.ContentLength != 0 && !isJSON(r.Header.Get("Content-Type")) {
		writeError(w, http.StatusUnsupportedMediaType, api.CodeInvalidRequest, "send the body as Content-Type: application/json")
		return admission{}
	}
	if limit := rt.MaxBody; limit != NoBodyLimit {
		if limit <= 0 {
			limit = h.o.MaxBodyBytes
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	}
	return h.admitPrincipal(w, r, rt, p)
}

// admitPrincipal gives r its principal's context; for a scoped token, after
// the scope check, a context that ends when the token is revoked.
func (h *handler) admitPrincipal(w http.ResponseWriter, r *http.Request, rt *row, p *tokens.Principal) admission {
	if p == nil || p.IsAdmin() {
		if p == nil {
			p = tokens.Admin // an exempt route without a token: it shows nothing
		}
		return admission{ok: true, r: r.WithContext(tokens.NewContext(r.Context(), p)), p: p}
	}
	ctx, cancel := context.WithCancelCause(tokens.NewContext(r.Context(), p))
	r = r.WithContext(ctx)
	if h.matched(rt) {
		sc, ref := h.scopeCheck(r, rt, p)
		if ref != nil {
			cancel(nil)
			if ref.retry > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(ref.retry))
			}
			status, code := classify(ref.err)
			if ref.status != 0 {
				status = ref.status
			}
			writeError(w, status, code, ref.err.Error())
			return admission{p: p, sc: sc}
		}
		stop := context.AfterFunc(p.Revoked(), func() { cancel(context.Cause(p.Revoked())) })
		return admission{ok: true, r: r, p: p, sc: sc, cancel: cancel, stop: stop}
	}
	stop := context.AfterFunc(p.Revoked(), func() { cancel(context.Cause(p.Revoked())) })
	return admission{ok: true, r: r, p: p, cancel: cancel, stop: stop}
}

// matched reports whether rt is a row of the table (not admit's stand-in
// for no route).
func (h *handler) matched(rt *row) bool { return rt != nil && rt.Pattern != "" }

// principal returns who r comes from: the admin (the server's token, or any
// request when the server has none), a live scoped token, or nil with why.
func (h *handler) principal(r *http.Request) (*tokens.Principal, error) {
	if h.o.Token == "" || bearer(r, h.o.Token) {
		return tokens.Admin, nil
	}
	secret, ok := bearerValue(r)
	if !ok || h.o.Tokens == nil {
		return nil, tokens.ErrUnknown
	}
	return h.o.Tokens.Authenticate(secret)
}

// bearer reports whether r carries token as "Authorization: Bearer <token>",
// or as "Authorization: token <token>", the form Jupyter's clients send (its
// gateway client, a notebook's).
func bearer(r *http.Request, token string) bool {
	tok, ok := bearerValue(r)
	return ok && subtle.ConstantTimeCompare([]byte(tok), []byte(token)) == 1
}

// bearerValue is the token r carries ("Bearer <t>" or "token <t>").
func bearerValue(r *http.Request) (string, bool) {
	auth := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		tok, ok = strings.CutPrefix(auth, "token ")
	}
	return tok, ok
}

// hostRule is Options.Hosts, ready to check a Host header.
type hostRule struct {
	any      bool // neither Loopback nor Allowed: every Host is accepted
	loopback bool
	allowed  map[string]bool
}

func newHostRule(o Hosts) hostRule {
	hr := hostRule{loopback: o.Loopback, allowed: map[string]bool{}}
	for _, a := range o.Allowed {
		hr.allowed[strings.ToLower(strings.TrimSuffix(a, "."))] = true
	}
	hr.any = !hr.loopback && len(hr.allowed) == 0
	return hr
}

// allows reports whether a request's Host names this server.
func (hr hostRule) allows(host string) bool {
	if hr.any {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	if name == "" {
		return false
	}
	if hr.allowed[name] {
		return true
	}
	if !hr.loopback {
		return false
	}
	if name == "localhost" {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// quoteHost quotes a Host header for an error message, clipped and valid UTF-8.
func quoteHost(h string) string {
	if len(h) > 200 {
		h = h[:200]
	}
	return "\"" + strings.ToValidUTF8(h, "?") + "\""
}

// isUpgrade reports whether r asks for a WebSocket.
func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}
