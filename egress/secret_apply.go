package egress

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"strings"
	"time"
)

// SecretUse is one request that carried a secret, as a call's network notes
// and kernelbox's log show it: never the value.
type SecretUse struct {
	// Rule is the secret rule's name.
	Rule string
	// Method and Path are the request's (Path without its query).
	Method, Path string
	// Status is the host's answer (502 when none came).
	Status int
	// Up and Down are the bytes carried each way for this request, on the wire.
	Up, Down int64
}

// String is the use in a note: `secret vendor: GET /v1/items 200, 80 B up, 1.2 kB down`.
// A plain-HTTP use (allow_plain_http) has no status or bytes of its own: the
// connection's are the request's.
func (u SecretUse) String() string {
	if u.Status == 0 {
		return fmt.Sprintf("secret %s: %s %s over plain HTTP", u.Rule, u.Method, u.Path)
	}
	return fmt.Sprintf("secret %s: %s %s %d, %d B up, %d B down", u.Rule, u.Method, u.Path, u.Status, u.Up, u.Down)
}

// check decides on one request of an intercepted connection: HTTP/1.x, a Host
// that is the CONNECT's host, a path that reads one way; it returns the rule
// whose secret it gets, or nil.
func (s *session) check(req *http.Request) (*secretRule, Decision, bool) {
	if req.ProtoMajor != 1 {
		return nil, deny("http/2", fmt.Sprintf("%s inside TLS: the proxy speaks HTTP/1.1 to intercepted hosts (ALPN offers http/1.1 only)", req.Proto)), false
	}
	if !sameHost(req.Host, s.host.Name, s.port, s.port) {
		return nil, deny("host mismatch", fmt.Sprintf("the Host %q names another host than the TLS connection's %s; a connection intercepted for a secret carries requests to its own host only", clip(req.Host), s.host)), false
	}
	if req.Method == "CONNECT" || req.URL.Path == "" && req.RequestURI != "*" {
		return nil, deny("request smuggling or bounds", "inside TLS: a request without a path"), false
	}
	secrets := s.p.o.Rules.secrets
	p, ok := cleanPath(req.URL)
	if !ok && secrets.pathLimited(s.host, s.port, true) {
		return nil, deny("ambiguous path", fmt.Sprintf("the path %q has dot segments, empty segments or encoded separators, which a host could read as another path than the secret rule's", clip(req.URL.EscapedPath()))), false
	}
	stripHopByHop(req)
	return secrets.match(s.host, s.port, true, p), Decision{}, true
}

// cleanPath returns the request's decoded path, and false when it has a form
// two readers could resolve to different paths (dot or empty segments, an
// encoded slash, dot or backslash).
func cleanPath(u *url.URL) (string, bool) {
	raw := strings.ToLower(u.EscapedPath())
	for _, bad := range []string{"%2f", "%2e", "%5c", "\\", "//"} {
		if strings.Contains(raw, bad) {
			return u.Path, false
		}
	}
	c := path.Clean(u.Path)
	if strings.HasSuffix(u.Path, "/") && c != "/" {
		c += "/"
	}
	return u.Path, c == u.Path
}

// pathLimited says whether a rule naming host:port limits its paths.
func (s *Secrets) pathLimited(h Host, port int, tls bool) bool {
	for _, r := range s.rules {
		if len(r.Paths) > 0 && r.names(h, port, tls) {
			return true
		}
	}
	return false
}

// stripHopByHop removes the headers that belong to the kernel's connection,
// keeping an upgrade (WebSocket) request's Connection and Upgrade.
func stripHopByHop(req *http.Request) {
	upgrade := req.Header.Get("Upgrade")
	isUpgrade := upgrade != "" && headerHasToken(req.Header, "Connection", "upgrade")
	for _, v := range req.Header.Values("Connection") {
		for _, k := range strings.Split(v, ",") {
			if k = textproto.TrimString(k); k != "" && !strings.EqualFold(k, "upgrade") {
				req.Header.Del(k)
			}
		}
	}
	for k := range req.Header {
		if hopByHop(k) {
			delete(req.Header, k)
		}
	}
	if isUpgrade {
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", upgrade)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		// net/http would add its own; the host sees the kernel's request.
		req.Header["User-Agent"] = []string{""}
	}
	req.RequestURI = ""
}

// headerHasToken says whether a comma-separated header holds token.
func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(textproto.TrimString(t), token) {
				return true
			}
		}
	}
	return false
}

// apply puts the rule's credential on req. A request that carries the rule's
// header with anything but the placeholder is refused rather than stripped:
// code that sends a credential of its own should learn that it is not the
// one used, and a value the kernel chose never travels beside the secret.
func (r *secretRule) apply(req *http.Request) error {
	v := r.val.Load()
	if v == nil {
		return errors.New("no value loaded")
	}
	if r.Kind == KindSigV4 {
		return r.sign(req, v, time.Now())
	}
	have := req.Header.Values(r.Header)
	switch {
	case len(have) > 1:
		return fmt.Errorf("the request carries %s %d times; send it once with the placeholder %s, or not at all", r.Header, len(have), Placeholder(r.Name))
	case len(have) == 1 && !strings.Contains(have[0], Placeholder(r.Name)):
		return fmt.Errorf("the request carries its own %s; kernelbox adds the credential of rule %s here: send none, or the placeholder %s", r.Header, r.Name, Placeholder(r.Name))
	}
	req.Header.Set(r.Header, v.value)
	return nil
}

// plainSecret adds a secret to a plain-HTTP request (forward) when a rule with
// AllowPlainHTTP names its host, port and path; it answers and returns false
// when the request is refused. Without such a rule nothing is added: a secret
// never goes over plain HTTP unless its rule says so.
func (p *Proxy) plainSecret(c net.Conn, req *http.Request, h *head, rec *Record) bool {
	s := p.o.Rules.secrets
	host, err := ParseHost(h.host)
	if s == nil || err != nil || !s.applies(host, h.port, false) {
		return true
	}
	pth, ok := cleanPath(req.URL)
	if !ok && s.pathLimited(host, h.port, false) {
		rec.Decision = deny("ambiguous path", fmt.Sprintf("the path %q has dot segments, empty segments or encoded separators, which a host could read as another path than the secret rule's", clip(req.URL.EscapedPath())))
		refuse(c, rec.Decision)
		return false
	}
	r := s.match(host, h.port, false, pth)
	if r == nil {
		return true
	}
	if err := r.apply(req); err != nil {
		rec.Decision = deny("secret "+r.Name, err.Error())
		refuse(c, rec.Decision)
		return false
	}
	p.log.Info("egress secret used", "session", p.o.Session, "rule", r.Name, "host", host.String(), "method", req.Method, "path", clip(req.URL.EscapedPath()), "plain_http", true)
	rec.SecretUses = append(rec.SecretUses, SecretUse{Rule: r.Name, Method: req.Method, Path: clip(req.URL.EscapedPath())})
	return true
}
