package egress

import (
	"fmt"
	"net/netip"
	"time"
)

// Record is one client connection to the proxy: what it asked for, what the proxy
// decided and dialled, and what it carried. Each connection ends in exactly one.
type Record struct {
	// Session is the session's id (Options.Session, or the id Proxy.Adopt
	// gave a warm kernel's proxy).
	Session string
	// Method is "CONNECT" or the plain-HTTP method; "" when no request was read.
	Method string
	// Host and Port are the target asked for (Host canonical when it parsed).
	Host string
	Port int
	// Addr is the address dialled; invalid when none was.
	Addr netip.AddrPort
	// Decision is the verdict; a connection allowed and later cut (byte limit,
	// server name mismatch) has the rule that cut it and Effect Deny.
	Decision Decision
	// Up and Down are the bytes carried client→server and server→client.
	Up, Down int64
	// Start is when the connection was accepted; Duration how long it lasted.
	Start    time.Time
	Duration time.Duration
	// SecretUses are the requests of an intercepted connection that carried a
	// secret (at most 20; MoreSecretUses counts the rest): rule, method, path,
	// status and bytes, never the value.
	SecretUses     []SecretUse
	MoreSecretUses int
	// Err is how an allowed connection failed ("dial: connection refused",
	// "idle timeout"), or "".
	Err string
}

// String is the record as a one-line note for a call's Result, such as
// `network: deny evil.example:443 (default deny): no allow entry matches evil.example:443`
// or `network: allow files.example:80 via 192.0.2.7:80, 1.2 kB up, 3.4 MB down, 120ms`.
func (r Record) String() string {
	target := fmt.Sprintf("%s:%d", r.Host, r.Port)
	if r.Host == "" {
		target = "(no target read)"
	}
	var s string
	if r.Decision.Effect == Deny {
		// An intercepted connection cut by a refusal still lists the
		// requests that carried a secret before it.
		s = fmt.Sprintf("network: deny %s (%s): %s", target, r.Decision.Rule, r.Decision.Reason)
	} else {
		s = fmt.Sprintf("network: allow %s via %s, %d B up, %d B down, %s", target, r.Addr, r.Up, r.Down, r.Duration.Round(time.Millisecond))
	}
	for _, u := range r.SecretUses {
		s += "; " + u.String()
	}
	if r.MoreSecretUses > 0 {
		s += fmt.Sprintf("; %d more requests with a secret", r.MoreSecretUses)
	}
	if r.Err != "" && r.Decision.Effect != Deny {
		s += "; " + r.Err
	}
	return s
}

// Stats counts a proxy's connections since it started.
type Stats struct {
	// Connections is every client connection ended; Refused those denied.
	Connections, Refused int64
	// Up and Down are the bytes carried each way.
	Up, Down int64
	// Active is the connections open now, each from its accept; Closing those of
	// them one side of which has ended (their records are moments away).
	Active, Closing int
	// AcceptErrors counts failed accepts (the server out of descriptors, for
	// one), each followed by a back-off.
	AcceptErrors int64
}
