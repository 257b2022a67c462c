package httpapi

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/origin"
)

// ServeHTTP is the one guard: every request, whatever its route (one of the
// table's or none), is admitted by admit before a handler runs.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rt, r := h.match(r)
	if h.admit(w, r, rt) {
		if rt != nil {
			h.mux.ServeHTTP(w, r)
		} else {
			h.noRoute(w, r)
		}
	}
	h.log.Debug("http", "method", r.Method, "path", r.URL.Path, "duration", time.Since(start))
}

// admit checks r against its route rt (nil when none matched) and answers the
// refusal itself, in this order:
//
//  1. the connection reserve: on a reserved connection, a request without the
//     token to a route that is not a Probe is 503 and its connection closed;
//  2. the Host, against Options.Hosts (DNS rebinding): 403 forbidden_host;
//  3. the token, unless the route is exempt: 401 unauthorized;
//  4. a cross-site request that changes state (http.CrossOriginProtection:
//     Sec-Fetch-Site, else Origin against Host), or a WebSocket upgrade from
//     another origin: 403 cross_origin;
//  5. the content type of a body of a JSON route: 415;
//
// and then limits the body to the route's MaxBody.
func (h *handler) admit(w http.ResponseWriter, r *http.Request, rt *row) bool {
	if rt == nil {
		// A request that matches no route needs the token too, so that the
		// routes cannot be probed without it; its body limit is MaxBodyBytes.
		rt = &row{Route: Route{Access: NeedsToken}}
	}
	tokenOK := h.o.Token == "" || bearer(r, h.o.Token)
	switch {
	case !tokenOK && rt.Access != Probe && h.o.Reserve != nil && h.o.Reserve.Reserved(r):
		h.o.Reserve.Refused()
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, api.CodeTooManyConnections,
			"the server is near its connection limit (--max-conns); its last slots serve requests with the token and /healthz only")
		return false
	case !h.hosts.allows(r.Host):
		writeError(w, http.StatusForbidden, api.CodeForbiddenHost, "Host "+quoteHost(r.Host)+" is not this server's: a loopback listener accepts localhost, 127.0.0.1 and [::1]; add other names with --allowed-host")
		return false
	case !tokenOK && rt.Access == NeedsToken:
		w.Header().Set("WWW-Authenticate", `Bearer realm="kernelbox"`)
		writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "missing or wrong bearer token")
		return false
	}
	if err := h.csrf.Check(r); err != nil {
		writeError(w, http.StatusForbidden, api.CodeCrossOrigin, "cross-origin browser requests are refused: "+err.Error())
		return false
	}
	if isUpgrade(r) && !origin.Same(r) {
		// A WebSocket upgrade is a GET, which CrossOriginProtection lets
		// through; a page of another origin must not open one.
		writeError(w, http.StatusForbidden, api.CodeCrossOrigin, "cross-origin WebSocket upgrades are refused: the Origin must be this server's")
		return false
	}
	if rt.JSON && r.ContentLength != 0 && !isJSON(r.Header.Get("Content-Type")) {
		writeError(w, http.StatusUnsupportedMediaType, api.CodeInvalidRequest, "send the body as Content-Type: application/json")
		return false
	}
	if limit := rt.MaxBody; limit != NoBodyLimit {
		if limit <= 0 {
			limit = h.o.MaxBodyBytes
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	}
	return true
}

// bearer reports whether r carries token as "Authorization: Bearer <token>",
// or as "Authorization: token <token>", the form Jupyter's clients send (its
// gateway client, a notebook's).
func bearer(r *http.Request, token string) bool {
	auth := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		tok, ok = strings.CutPrefix(auth, "token ")
	}
	return ok && subtle.ConstantTimeCompare([]byte(tok), []byte(token)) == 1
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
