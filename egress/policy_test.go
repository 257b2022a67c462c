package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func mustCompile(tb testing.TB, p Policy) *Rules {
	tb.Helper()
	r, err := Compile(p)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func TestCheckName(t *testing.T) {
	t.Parallel()
	r := mustCompile(t, Policy{
		Allow: []string{"pypi.example:443", "files.example", "*.data.example:443", "Bücher.example.", "192.0.2.7:8080", "[2001:db8::7]:443"},
	})
	tests := []struct {
		host   string
		port   int
		effect Effect
		rule   string // substring of the deciding rule
	}{
		{"pypi.example", 443, Allow, `allow "pypi.example:443"`},
		{"PyPI.Example.", 443, Allow, `allow "pypi.example:443"`},
		{"pypi.example", 80, Deny, `allow "pypi.example:443"`},
		{"files.example", 80, Allow, `allow "files.example"`},
		{"files.example", 443, Allow, `allow "files.example"`},
		{"files.example", 22, Deny, `allow "files.example"`},
		{"a.data.example", 443, Allow, `allow "*.data.example:443"`},
		{"x.y.DATA.example", 443, Allow, `allow "*.data.example:443"`},
		{"data.example", 443, Deny, "default deny"},
		{"evildata.example", 443, Deny, "default deny"},
		{"data.example.evil", 443, Deny, "default deny"},
		{"xn--bcher-kva.example", 443, Allow, `allow "Bücher.example."`},
		{"BÜCHER.example", 80, Allow, `allow "Bücher.example."`},
		{"evil.example", 443, Deny, "default deny"},
		{"", 443, Deny, "malformed host"},
		{"files.example", 0, Deny, "malformed port"},
		{"files.example", 70000, Deny, "malformed port"},
		{"bad host", 80, Deny, "malformed host"},
		{"a..example", 80, Deny, "malformed host"},
		{"-a.example", 80, Deny, "malformed host"},
		{"192.0.2.7", 8080, Allow, `allow "192.0.2.7:8080"`},
		{"192.0.2.7", 80, Deny, `allow "192.0.2.7:8080"`},
		{"192.0.2.8", 8080, Deny, "ip literal"},
		{"::ffff:192.0.2.7", 8080, Allow, `allow "192.0.2.7:8080"`},
		{"[2001:db8::7]", 443, Allow, `allow "[2001:db8::7]:443"`},
		{"2001:db8::7", 443, Allow, `allow "[2001:db8::7]:443"`},
		// IP literals in every form are refused unless an entry names the address.
		{"127.0.0.1", 80, Deny, "ip literal"},
		{"169.254.169.254", 80, Deny, "ip literal"},
		{"2130706433", 80, Deny, "ip literal"},         // decimal 127.0.0.1
		{"0177.0.0.1", 80, Deny, "ip literal"},         // octal
		{"0x7f.0.0.1", 80, Deny, "ip literal"},         // hex
		{"0x7f000001", 80, Deny, "ip literal"},         // hex, one part
		{"127.1", 80, Deny, "ip literal"},              // short
		{"3221226247", 8080, Deny, "ip literal"},       // decimal 192.0.2.7, even though allowed dotted
		{"192.0.2.07", 8080, Deny, "ip literal"},       // leading zero: octal to some parsers
		{"[::1]", 80, Deny, "ip literal"},              // IPv6 loopback
		{"[::ffff:127.0.0.1]", 80, Deny, "ip literal"}, // IPv4-mapped
		{"[fe80::1%eth0]", 80, Deny, "ip literal"},
		{"１２７.０.０.１", 80, Deny, "ip literal"}, // full-width digits
		{"999.1.1.1", 80, Deny, "ip literal"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			t.Parallel()
			_, d := r.CheckName(tt.host, tt.port)
			if d.Effect != tt.effect || !strings.Contains(d.Rule, tt.rule) {
				t.Fatalf("CheckName(%q, %d) = %v; want %v by a rule holding %q", tt.host, tt.port, d, tt.effect, tt.rule)
			}
			if d.Reason == "" {
				t.Fatal("no reason")
			}
		})
	}
}

func TestCheckNameDefaultDeny(t *testing.T) {
	t.Parallel()
	for _, p := range []Policy{{}, {CIDRs: []string{"0.0.0.0/0", "::/0"}}} {
		r := mustCompile(t, p)
		for _, h := range []string{"example.com", "1.1.1.1", "localhost"} {
			if _, d := r.CheckName(h, 443); d.Effect != Deny {
				t.Errorf("policy %+v allowed %s: %v", p, h, d)
			}
		}
	}
}

func TestCheckAddr(t *testing.T) {
	t.Parallel()
	r := mustCompile(t, Policy{CIDRs: []string{"10.20.0.0/16", "fd00:1::/32"}})
	tests := []struct {
		addr   string
		effect Effect
		rule   string
	}{
		{"93.184.216.34", Allow, "public address"},
		{"2606:2800:220:1::1", Allow, "public address"},
		{"10.20.3.4", Allow, "cidr 10.20.0.0/16"},
		{"::ffff:10.20.3.4", Allow, "cidr 10.20.0.0/16"},
		{"fd00:1::5", Allow, "cidr fd00:1::/32"},
		{"10.21.0.1", Deny, "10.0.0.0/8"},
		{"127.0.0.1", Deny, "127.0.0.0/8"},
		{"::ffff:127.0.0.1", Deny, "127.0.0.0/8"},
		{"169.254.169.254", Deny, "169.254.0.0/16"},
		{"::ffff:169.254.169.254", Deny, "169.254.0.0/16"},
		{"172.16.0.1", Deny, "172.16.0.0/12"},
		{"192.168.1.1", Deny, "192.168.0.0/16"},
		{"100.64.0.1", Deny, "100.64.0.0/10"},
		{"224.0.0.1", Deny, "224.0.0.0/4"},
		{"255.255.255.255", Deny, "255.255.255.255/32"},
		{"0.0.0.0", Deny, "0.0.0.0/8"},
		{"::", Deny, "::/128"},
		{"::1", Deny, "::1/128"},
		{"::127.0.0.1", Deny, "::/96"},
		{"64:ff9b::a9fe:a9fe", Deny, "64:ff9b::/96"},
		{"2002:a9fe:a9fe::1", Deny, "2002::/16"},
		{"fc00::1", Deny, "fc00::/7"},
		{"fe80::1", Deny, "fe80::/10"},
		{"fe80::1%eth0", Deny, "zone"},
		{"ff02::1", Deny, "ff00::/8"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			t.Parallel()
			d := r.CheckAddr(netip.MustParseAddr(tt.addr))
			if d.Effect != tt.effect || !(strings.Contains(d.Rule, tt.rule) || strings.Contains(d.Reason, tt.rule)) {
				t.Fatalf("CheckAddr(%s) = %v; want %v naming %q", tt.addr, d, tt.effect, tt.rule)
			}
		})
	}
	if d := r.CheckAddr(netip.Addr{}); d.Effect != Deny {
		t.Fatalf("invalid address allowed: %v", d)
	}
}

func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	tests := []Policy{
		{Allow: []string{"*.com"}},
		{Allow: []string{"*.127.0.0.1"}},
		{Allow: []string{"2130706433"}},
		{Allow: []string{"files.example:0"}},
		{Allow: []string{"files.example:65536"}},
		{Allow: []string{"files.example:"}},
		{Allow: []string{"files.example:08"}},
		{Allow: []string{"bad name"}},
		{Allow: []string{""}},
		{CIDRs: []string{"10.0.0.0"}},
		{CIDRs: []string{"::ffff:10.0.0.0/104"}},
		{MaxBytes: -1},
		{MaxConns: -1},
		{Allow: make([]string, MaxAllow+1)},
	}
	for _, p := range tests {
		if _, err := Compile(p); err == nil {
			t.Errorf("Compile(%+v) = nil error", p)
		}
	}
}

func TestParseHost(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"Example.COM.", "example.com"},
		{"münchen.example", "xn--mnchen-3ya.example"},
		{"bücher.example", "xn--bcher-kva.example"},
		{"例え.テスト", "xn--r8jz45g.xn--zckzah"},
		{"a。example", "a.example"},
		{"10.0.0.1", "10.0.0.1"},
		{"[::1]", "::1"},
	}
	for _, tt := range tests {
		h, err := ParseHost(tt.in)
		if err != nil || h.String() != tt.want {
			t.Errorf("ParseHost(%q) = %q, %v; want %q", tt.in, h, err, tt.want)
		}
	}
	if _, err := ParseHost(strings.Repeat("a.", 130) + "example"); err == nil {
		t.Error("a name over 253 bytes parsed")
	}
}
