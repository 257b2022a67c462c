package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxNameBytes is the longest host name accepted (RFC 1035's 253, in A-labels).
const MaxNameBytes = 253

// Host is a request's or a rule's host, canonical: lower case, no trailing dot,
// internationalized labels in their ASCII (punycode, "xn--") form; or an address.
type Host struct {
	// Name is the canonical name; empty when the host is an address.
	Name string
	// Addr is the address of an IP literal; invalid for a name.
	Addr netip.Addr
	// Literal says the host was written as an IP literal, in any form; Canonical
	// says it was in the one form that is accepted (dotted quad of four decimal
	// numbers without leading zeros, or a bracketed/plain IPv6 address).
	Literal, Canonical bool
}

// String prints the host as canonically written.
func (h Host) String() string {
	if h.Literal {
		return h.Addr.String()
	}
	return h.Name
}

// ParseHost reads a host name or IP literal (IPv6 with or without brackets). It
// lowers case, drops one trailing dot, converts internationalized labels to
// A-labels and recognizes IP literals in every form an inet_aton-style parser
// accepts (decimal "2130706433", octal "0177.0.0.1", hex "0x7f.1", short "127.1"),
// so that they can be refused rather than taken as names.
func ParseHost(s string) (Host, error) {
	if s == "" {
		return Host{}, errors.New("empty host")
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		a, err := netip.ParseAddr(s[1 : len(s)-1])
		if err != nil || !a.Is6() {
			return Host{}, fmt.Errorf("host %q: not an IPv6 address", s)
		}
		return Host{Addr: a, Literal: true, Canonical: a.Zone() == ""}, nil
	}
	if strings.Contains(s, ":") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return Host{}, fmt.Errorf("host %q: not a name or address", s)
		}
		return Host{Addr: a, Literal: true, Canonical: a.Zone() == ""}, nil
	}
	s = strings.TrimSuffix(s, ".")
	if a, canonical, ok := parseIPv4Loose(s); ok {
		return Host{Addr: a, Literal: true, Canonical: canonical}, nil
	}
	name, err := toASCII(s)
	if err != nil {
		return Host{}, err
	}
	if a, _, ok := parseIPv4Loose(name); ok {
		// Full-width digits and dots map to an address too; never canonical.
		return Host{Addr: a, Literal: true}, nil
	}
	return Host{Name: name}, nil
}

// toASCII lowers a name and converts its non-ASCII labels to punycode A-labels,
// checking RFC 1035/1123 label syntax on the result.
func toASCII(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("host %q: not valid UTF-8", s)
	}
	// Ideographic dots separate labels as "." does, and full-width ASCII is its
	// ASCII (UTS #46 mapping). Other compatibility characters are not folded (there
	// is no NFKC table here): such a name matches no entry, so it fails closed.
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\u3002' || r == '\uff61':
			return '.'
		case r >= '\uff01' && r <= '\uff5e':
			return r - 0xff01 + '!'
		}
		return r
	}, s)
	s = strings.TrimSuffix(strings.ToLower(s), ".")
	if s == "" {
		return "", errors.New("empty host")
	}
	labels := strings.Split(s, ".")
	for i, l := range labels {
		if l == "" {
			return "", fmt.Errorf("host %q: empty label", s)
		}
		if !isASCII(l) {
			p, err := punyEncode(l)
			if err != nil {
				return "", fmt.Errorf("host %q: %w", s, err)
			}
			l = "xn--" + p
			labels[i] = l
		}
		if len(l) > 63 {
			return "", fmt.Errorf("host %q: a label is over 63 bytes", s)
		}
		for j := 0; j < len(l); j++ {
			c := l[j]
			ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				return "", fmt.Errorf("host %q: character %q is not allowed in a name", s, c)
			}
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", fmt.Errorf("host %q: a label starts or ends with '-'", s)
		}
	}
	out := strings.Join(labels, ".")
	if len(out) > MaxNameBytes {
		return "", fmt.Errorf("host: name over %d bytes", MaxNameBytes)
	}
	return out, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// parseIPv4Loose parses s as inet_aton does: one to four parts, each decimal,
// octal (leading 0) or hex (0x), the last filling the remaining bytes. ok is
// false when s is not such an address (then it is a name); canonical is true only
// for four decimal parts without leading zeros.
func parseIPv4Loose(s string) (a netip.Addr, canonical, ok bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return a, false, false
	}
	vals := make([]uint64, len(parts))
	canonical = len(parts) == 4
	for i, p := range parts {
		v, canon, ok := parseIPv4Part(p)
		if !ok {
			return a, false, false
		}
		vals[i] = v
		canonical = canonical && canon
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return a, false, true // still a literal: refuse it, never resolve it
		}
		n |= v << (8 * (3 - i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return a, false, true
	}
	n |= last
	b := [4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	return netip.AddrFrom4(b), canonical, true
}

// parseIPv4Part reads one part of a loose IPv4 address.
func parseIPv4Part(p string) (v uint64, canonical, ok bool) {
	if p == "" || len(p) > 12 {
		return 0, false, false
	}
	base, digits := 10, p
	switch {
	case len(p) > 1 && (p[:2] == "0x" || p[:2] == "0X"):
		base, digits = 16, p[2:]
		if digits == "" {
			return 0, false, true
		}
	case len(p) > 1 && p[0] == '0':
		base, digits = 8, p[1:]
	}
	v, err := strconv.ParseUint(digits, base, 64)
	if err != nil {
		return 0, false, false
	}
	return v, base == 10 && v <= 255, true
}
