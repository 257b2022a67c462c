package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Limits on a policy.
const (
	// MaxAllow is the most allow entries in one policy.
	MaxAllow = 256
	// MaxCIDRs is the most CIDRs in one policy.
	MaxCIDRs = 64
	// DefaultMaxConns is a policy's concurrent-connection limit when it sets none.
	DefaultMaxConns = 32
	// DefaultMaxBytes is a policy's byte limit (both ways, whole session) when it
	// sets none: 1 GiB.
	DefaultMaxBytes = 1 << 30
)

// Policy is what an operator writes as a template's "network" setting: the names a
// session may reach, address ranges lifted from the special-purpose refusal, and
// per-session limits. The zero value allows nothing.
//
//	{"allow": ["pypi.example:443", "files.example", "*.data.example:443"],
//	 "cidrs": ["10.20.0.0/16"], "max_bytes": 104857600, "max_conns": 8}
type Policy struct {
	// Allow lists host entries: an exact name ("files.example"), a suffix
	// ("*.data.example" matches every name below data.example, not data.example
	// itself), or a canonical IP address ("192.0.2.7", "[2001:db8::7]"), each with
	// an optional ":port". Without a port an entry allows 80 and 443. Names are
	// compared case-insensitively, without a trailing dot, in A-label (punycode)
	// form, so "Bücher.example." and "xn--bcher-kva.example" are one entry.
	Allow []string `json:"allow"`

	// CIDRs are address ranges the proxy may dial even though they are
	// special-purpose (private, loopback, link-local, CGNAT...). They allow no name
	// by themselves: a name must still match Allow. Defaults to none.
	CIDRs []string `json:"cidrs,omitempty"`

	// MaxBytes bounds the bytes carried for one session, both ways added, over
	// its life; a connection that passes it is cut. Defaults to DefaultMaxBytes.
	MaxBytes int64 `json:"max_bytes,omitempty"`

	// MaxConns bounds one session's concurrent connections through the proxy;
	// one more is refused with a 403. Defaults to DefaultMaxConns.
	MaxConns int `json:"max_conns,omitempty"`
}

// Rules is a compiled Policy. It is immutable and safe for concurrent use.
type Rules struct {
	policy  Policy
	allow   []allowEntry
	cidrs   []netip.Prefix
	secrets *Secrets // see WithSecrets; nil: none
}

// allowEntry is one compiled Allow entry.
type allowEntry struct {
	text   string
	name   string     // canonical name; the suffix without "*." for a suffix entry
	suffix bool       // "*." entry
	addr   netip.Addr // valid for an address entry
	port   uint16     // 0: 80 and 443
}

// Compile checks p and returns its rules, or an error naming the bad entry.
func Compile(p Policy) (*Rules, error) {
	if len(p.Allow) > MaxAllow {
		return nil, fmt.Errorf("allow: %d entries; the limit is %d", len(p.Allow), MaxAllow)
	}
	if len(p.CIDRs) > MaxCIDRs {
		return nil, fmt.Errorf("cidrs: %d entries; the limit is %d", len(p.CIDRs), MaxCIDRs)
	}
	if p.MaxBytes < 0 || p.MaxConns < 0 {
		return nil, errors.New("max_bytes and max_conns must not be negative")
	}
	r := &Rules{policy: p}
	if r.policy.MaxBytes == 0 {
		r.policy.MaxBytes = DefaultMaxBytes
	}
	if r.policy.MaxConns == 0 {
		r.policy.MaxConns = DefaultMaxConns
	}
	for _, s := range p.Allow {
		e, err := parseAllow(s)
		if err != nil {
			return nil, fmt.Errorf("allow %q: %w", s, err)
		}
		r.allow = append(r.allow, e)
	}
	for _, s := range p.CIDRs {
		pr, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("cidrs %q: want a range such as 10.20.0.0/16 or fd00::/8", s)
		}
		if pr.Addr().Is4In6() {
			return nil, fmt.Errorf("cidrs %q: write IPv4 ranges as IPv4", s)
		}
		r.cidrs = append(r.cidrs, pr.Masked())
	}
	return r, nil
}

// parseAllow reads one Allow entry.
func parseAllow(s string) (allowEntry, error) {
	e := allowEntry{text: s}
	host, port := s, ""
	if i := strings.LastIndexByte(s, ':'); i >= 0 && (!strings.Contains(s[:i], ":") || strings.HasSuffix(s[:i], "]")) {
		host, port = s[:i], s[i+1:]
		if port == "" {
			return e, errors.New("empty port")
		}
	}
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 || port[0] == '0' {
			return e, fmt.Errorf("port %q: want 1 to 65535", port)
		}
		e.port = uint16(n)
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		e.suffix, host = true, rest
	}
	h, err := ParseHost(host)
	if err != nil {
		return e, err
	}
	switch {
	case h.Literal && (e.suffix || !h.Canonical):
		return e, errors.New("an address entry must be one canonical address (dotted quad or [IPv6])")
	case h.Literal:
		e.addr = h.Addr.Unmap()
	case e.suffix && !strings.Contains(h.Name, "."):
		return e, errors.New(`a suffix entry must name a domain below a top-level one ("*.example.com", not "*.com")`)
	default:
		e.name = h.Name
	}
	return e, nil
}

// Policy returns the policy with its defaults filled in.
func (r *Rules) Policy() Policy { return r.policy }

// ports says which ports an entry allows.
func (e allowEntry) allows(port uint16) bool {
	if e.port == 0 {
		return port == 80 || port == 443
	}
	return e.port == port
}

// CheckName decides whether a session may ask for host:port: host as it came in
// the request (a name or an IP literal in any form). A name it allows must still
// resolve to addresses that CheckAddr allows. It is a pure function: deny by
// default, and the returned Host is the canonical form it decided on.
func (r *Rules) CheckName(host string, port int) (Host, Decision) {
	h, err := ParseHost(host)
	if err != nil {
		return h, deny("malformed host", err.Error())
	}
	if port < 1 || port > 65535 {
		return h, deny("malformed port", fmt.Sprintf("port %d is not 1 to 65535", port))
	}
	if h.Literal && !h.Canonical {
		return h, deny("ip literal", fmt.Sprintf("%q is an IP address in a non-canonical form (decimal, octal, hex or short); it is refused", host))
	}
	var portMiss *allowEntry
	for i, e := range r.allow {
		if !e.matches(h) {
			continue
		}
		if !e.allows(uint16(port)) {
			if portMiss == nil {
				portMiss = &r.allow[i]
			}
			continue
		}
		return h, Decision{Effect: Allow, Rule: "allow " + strconv.Quote(e.text), Reason: fmt.Sprintf("%s:%d matches allow entry %q", h, port, e.text)}
	}
	switch {
	case portMiss != nil:
		return h, deny("allow "+strconv.Quote(portMiss.text), fmt.Sprintf("port %d is not allowed for %s: entry %q allows %s", port, h, portMiss.text, portMiss.portText()))
	case h.Literal:
		return h, deny("ip literal", fmt.Sprintf("IP address %s is refused: no allow entry names it (connect by an allowed name)", h))
	}
	return h, deny("default deny", fmt.Sprintf("no allow entry matches %s:%d", h, port))
}

// matches says whether the entry names h, whatever the port.
func (e allowEntry) matches(h Host) bool {
	switch {
	case h.Literal:
		return e.addr.IsValid() && e.addr == h.Addr.Unmap()
	case e.suffix:
		return strings.HasSuffix(h.Name, "."+e.name)
	default:
		return e.name != "" && h.Name == e.name
	}
}

func (e allowEntry) portText() string {
	if e.port == 0 {
		return "ports 80 and 443"
	}
	return "port " + strconv.Itoa(int(e.port))
}

// CheckAddr decides whether the proxy may dial a: a public unicast address, or
// one inside an allowed CIDR. IPv4-mapped IPv6 addresses are judged as the IPv4
// address they carry. It is a pure function.
func (r *Rules) CheckAddr(a netip.Addr) Decision {
	if !a.IsValid() {
		return deny("malformed address", "no address")
	}
	if a.Zone() != "" {
		return deny("special range", fmt.Sprintf("address %s has a zone; scoped addresses are refused", a))
	}
	a = a.Unmap()
	for _, p := range r.cidrs {
		if p.Contains(a) {
			return Decision{Effect: Allow, Rule: "cidr " + p.String(), Reason: fmt.Sprintf("%s is in allowed range %s", a, p)}
		}
	}
	if sr, ok := special(a); ok {
		return deny("special range "+sr.prefix.String(), fmt.Sprintf("address %s is %s (%s); refused unless a cidrs entry allows it", a, sr.what, sr.prefix))
	}
	return Decision{Effect: Allow, Rule: "public address", Reason: fmt.Sprintf("%s is a public address", a)}
}
