package egress

import "net/netip"

// specialRange is an address range refused unless a CIDR allows it.
type specialRange struct {
	prefix netip.Prefix
	what   string
}

// specialRanges are the IANA special-purpose ranges a session must not reach by
// default: everything that is not a public unicast address. IPv4-mapped IPv6
// addresses are unmapped before the check, so ::ffff:127.0.0.1 is loopback; the
// NAT64 and 6to4 prefixes are refused whole, since they embed any IPv4 address.
var specialRanges = func() []specialRange {
	rows := []struct{ cidr, what string }{
		{"0.0.0.0/8", "unspecified (this network)"},
		{"10.0.0.0/8", "private"},
		{"100.64.0.0/10", "shared address space (CGNAT)"},
		{"127.0.0.0/8", "loopback"},
		{"169.254.0.0/16", "link-local (cloud metadata service)"},
		{"172.16.0.0/12", "private"},
		{"192.0.0.0/24", "IETF protocol assignments"},
		{"192.0.2.0/24", "documentation"},
		{"192.88.99.0/24", "6to4 relay anycast"},
		{"192.168.0.0/16", "private"},
		{"198.18.0.0/15", "benchmarking"},
		{"198.51.100.0/24", "documentation"},
		{"203.0.113.0/24", "documentation"},
		{"224.0.0.0/4", "multicast"},
		{"255.255.255.255/32", "broadcast"},
		{"240.0.0.0/4", "reserved"},
		{"::/128", "unspecified"},
		{"::1/128", "loopback"},
		{"::/96", "IPv4-compatible (deprecated)"},
		{"64:ff9b::/96", "NAT64"},
		{"64:ff9b:1::/48", "local NAT64"},
		{"100::/64", "discard-only"},
		{"2001::/23", "IETF protocol assignments"},
		{"2001:db8::/32", "documentation"},
		{"2002::/16", "6to4"},
		{"fc00::/7", "unique local (private)"},
		{"fe80::/10", "link-local"},
		{"fec0::/10", "site-local (deprecated)"},
		{"ff00::/8", "multicast"},
	}
	out := make([]specialRange, len(rows))
	for i, r := range rows {
		out[i] = specialRange{netip.MustParsePrefix(r.cidr), r.what}
	}
	return out
}()

// special returns the special-purpose range holding a, if any. a must be unmapped.
func special(a netip.Addr) (specialRange, bool) {
	for _, r := range specialRanges {
		if r.prefix.Contains(a) {
			return r, true
		}
	}
	return specialRange{}, false
}
