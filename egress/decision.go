package egress

// Effect is a decision's verdict. The zero value is Deny.
type Effect int

// The effects.
const (
	Deny Effect = iota
	Allow
)

// String returns "deny" or "allow".
func (e Effect) String() string {
	if e == Allow {
		return "allow"
	}
	return "deny"
}

// Decision is the verdict on one name or address, with the rule behind it.
type Decision struct {
	// Effect is Allow or Deny.
	Effect Effect
	// Rule names the deciding rule: `allow "files.example"`, "default deny",
	// "ip literal", "special range 169.254.0.0/16", "cidr 10.20.0.0/16",
	// "public address", "connection limit", "byte limit", "smuggling"...
	Rule string
	// Reason explains Effect in a sentence for a person or a model.
	Reason string
}

// String describes the decision: "deny (default deny): no allow entry matches
// evil.example:443".
func (d Decision) String() string {
	return d.Effect.String() + " (" + d.Rule + "): " + d.Reason
}

func deny(rule, reason string) Decision {
	return Decision{Effect: Deny, Rule: rule, Reason: reason}
}
