package permissions

import "fmt"

// Effect is what a rule, or a decision, does with a capability: allow it, deny it, or
// ask an Approver. The zero Effect is invalid, so a Rule whose effect was never set
// cannot allow anything by accident: Evaluate treats it as a broken rule (see Policy).
type Effect uint8

// The effects. Among matching rules Deny beats Ask and Ask beats Allow.
const (
	// Allow lets the capability be used.
	Allow Effect = iota + 1
	// Deny refuses the capability.
	Deny
	// Ask defers to the Engine's Approver; without one it is refused.
	Ask
)

// String returns "allow", "deny" or "ask", or "Effect(n)" for an invalid value.
func (e Effect) String() string {
	switch e {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	case Ask:
		return "ask"
	default:
		return fmt.Sprintf("Effect(%d)", uint8(e))
	}
}

// valid reports whether e is one of Allow, Deny and Ask.
func (e Effect) valid() bool { return e == Allow || e == Deny || e == Ask }

// ParseEffect parses "allow", "deny" or "ask" (exactly, lowercase).
func ParseEffect(s string) (Effect, error) {
	switch s {
	case "allow":
		return Allow, nil
	case "deny":
		return Deny, nil
	case "ask":
		return Ask, nil
	default:
		return 0, fmt.Errorf("unknown effect %q (want allow, deny or ask)", s)
	}
}

// MarshalText encodes e as "allow", "deny" or "ask", so an Effect is a JSON string.
func (e Effect) MarshalText() ([]byte, error) {
	if !e.valid() {
		return nil, fmt.Errorf("marshal effect: invalid effect %d", uint8(e))
	}
	return []byte(e.String()), nil
}

// UnmarshalText decodes "allow", "deny" or "ask".
func (e *Effect) UnmarshalText(b []byte) error {
	v, err := ParseEffect(string(b))
	if err != nil {
		return err
	}
	*e = v
	return nil
}
