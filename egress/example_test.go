package egress_test

import (
	"fmt"
	"net/netip"

	"github.com/kernelbox/kernelbox/egress"
)

// A policy decides on a name, then on every address the name resolves to.
func ExampleRules_CheckName() {
	rules, err := egress.Compile(egress.Policy{Allow: []string{"files.example", "*.data.example:443"}})
	if err != nil {
		panic(err)
	}
	for _, target := range []struct {
		host string
		port int
	}{{"FILES.example.", 80}, {"eu.data.example", 443}, {"eu.data.example", 80}, {"evil.example", 443}, {"0x7f000001", 80}} {
		_, d := rules.CheckName(target.host, target.port)
		fmt.Println(d)
	}
	fmt.Println(rules.CheckAddr(netip.MustParseAddr("169.254.169.254")))
	// Output:
	// allow (allow "files.example"): files.example:80 matches allow entry "files.example"
	// allow (allow "*.data.example:443"): eu.data.example:443 matches allow entry "*.data.example:443"
	// deny (allow "*.data.example:443"): port 80 is not allowed for eu.data.example: entry "*.data.example:443" allows port 443
	// deny (default deny): no allow entry matches evil.example:443
	// deny (ip literal): "0x7f000001" is an IP address in a non-canonical form (decimal, octal, hex or short); it is refused
	// deny (special range 169.254.0.0/16): address 169.254.169.254 is link-local (cloud metadata service) (169.254.0.0/16); refused unless a cidrs entry allows it
}
