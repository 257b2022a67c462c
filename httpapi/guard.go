package httpapi

import (
	"net"
	"net/http"
	"strings"

	"github.com/kernelbox/kernelbox/api"
)

// GuardOptions configures [Guard]. The zero value checks only CSRF.
type GuardOptions struct {
	// Token, when set, is required as "Authorization: Bearer <Token>" on every
	// path but those in Public.
	Token string

	// Loopback accepts the Host names of a loopback listener: localhost,
	// 127.0.0.0/8 and [::1], with or without a port.
	Loopback bool

	// AllowedHosts are further accepted Host names (without port; a port is
	// ignored). With neither Loopback nor AllowedHosts set, every Host is
	// accepted (a unix-socket listener, where no browser can reach).
	AllowedHosts []string

	// Public are the exact paths (or prefixes ending in "/") served without the
	// token: /healthz and the dashboard page and assets, which carry no data. A
	// prefix ends in "/"; "/" itself is exact.
	Public []string
}

// Guard wraps the whole mux of `kernelbox serve` with the request checks every
// route shares, in this order: a Host allowlist (DNS rebinding: a page served
// from an attacker's name that resolves to 127.0.0.1 sends that name as Host),
// the bearer token, and refusal of cross-origin browser requests that change state.
func Guard(o GuardOptions, h http.Handler) http.Handler {
	csrf := http.NewCrossOriginProtection()
	allowed := map[string]bool{}
	for _, a := range o.AllowedHosts {
		allowed[strings.ToLower(strings.TrimSuffix(a, "."))] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (o.Loopback || len(allowed) > 0) && !hostAllowed(r.Host, o.Loopback, allowed) {
			writeError(w, http.StatusForbidden, api.CodeForbiddenHost, "Host "+quoteHost(r.Host)+" is not this server's: a loopback listener accepts localhost, 127.0.0.1 and [::1]; add other names with --allowed-host")
			return
		}
		if o.Token != "" && !public(r.URL.Path, o.Public) && !authorized(r, o.Token) {
			unauthorized(w)
			return
		}
		if err := csrf.Check(r); err != nil {
			writeError(w, http.StatusForbidden, api.CodeCrossOrigin, "cross-origin browser requests are refused: "+err.Error())
			return
		}
		h.ServeHTTP(w, r)
	})
}

func quoteHost(h string) string {
	if len(h) > 200 {
		h = h[:200]
	}
	return "\"" + strings.ToValidUTF8(h, "?") + "\""
}

func public(path string, list []string) bool {
	for _, p := range list {
		if path == p || (len(p) > 1 && strings.HasSuffix(p, "/") && strings.HasPrefix(path, p)) {
			return true
		}
	}
	return false
}

// hostAllowed reports whether a request's Host names this listener.
func hostAllowed(host string, loopback bool, allowed map[string]bool) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	if name == "" {
		return false
	}
	if allowed[name] {
		return true
	}
	if !loopback {
		return false
	}
	if name == "localhost" {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}
