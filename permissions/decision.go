package permissions

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Decision is the verdict on one ResolvedCapability, with the rules behind it.
type Decision struct {
	// Capability is what was decided on.
	Capability ResolvedCapability

	// Effect is Allow or Deny; Ask only in what Policy.Evaluate returns and what
	// an Approver is shown, since Engine.Check settles every Ask.
	Effect Effect

	// Matched lists every rule that matched, in policy order, whatever its effect.
	Matched []Rule

	// Reason explains Effect in a sentence naming the deciding rules, such as
	// `denied by rule "SSH keys" (builtin)`, and, after an Approver was consulted,
	// its answer: "no rule matched; approved by operator".
	Reason string
}

// String describes the decision for a person or a model, such as
// `deny filesystem.read on /etc/shadow (requested as "data/link"): denied by rule
// "system secrets" (builtin)`.
func (d Decision) String() string {
	return d.Effect.String() + " " + d.subject() + ": " + d.Reason
}

// subject names the capability and its target: `filesystem.read on /etc/shadow`.
func (d Decision) subject() string {
	rc := d.Capability
	switch {
	case rc.Target != "" && rc.Target != rc.Requested && rc.Requested != "":
		return fmt.Sprintf("%s on %s (requested as %s)", rc.Name, showPath(rc.Target), strconv.Quote(rc.Requested))
	case rc.Target != "":
		return fmt.Sprintf("%s on %s", rc.Name, showPath(rc.Target))
	case rc.Requested != "" || rc.Problem != "":
		return fmt.Sprintf("%s on %s", rc.Name, strconv.Quote(rc.Requested))
	default:
		return rc.Name
	}
}

// showPath prints a path plainly unless it holds characters that could forge a line
// of a prompt or a log (newlines, control characters), in which case it is quoted.
func showPath(p string) string {
	if p == "" || strings.ContainsFunc(p, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(p)
	}
	return p
}

// label names a matched rule, noting when it was broken and applied fail-closed.
func (c compiledRule) label() string {
	if c.err != nil {
		return fmt.Sprintf("%s, which cannot be evaluated (%v) and so fails closed", c.rule.label(), c.err)
	}
	return c.rule.label()
}

// labels joins the distinct labels of rules.
func labels(rules []compiledRule) string {
	seen := make(map[string]bool, len(rules))
	var out []string
	for _, c := range rules {
		if l := c.label(); !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return strings.Join(out, ", ")
}

// evaluate decides rc against compiled rules: the pure core of Policy.Evaluate and
// Engine.Check.
func evaluate(rules []compiledRule, rc ResolvedCapability) Decision {
	d := Decision{Capability: rc, Effect: Deny}
	switch {
	case rc.Problem != "":
		d.Reason = rc.Problem
		return d
	case rc.Target != "" && !strings.HasPrefix(rc.Target, "/"):
		d.Reason = "target is not an absolute canonical path"
		return d
	}
	var denies, overridable, asks, allows []compiledRule
	exactAllow := false
	var elems targetElems
	for _, c := range rules {
		if c.err != nil && c.rule.Effect == Allow {
			continue // a broken allow allows nothing
		}
		if !c.matches(rc, &elems) {
			continue
		}
		d.Matched = append(d.Matched, c.rule)
		switch {
		case c.rule.Effect == Allow:
			allows = append(allows, c)
			exactAllow = exactAllow || c.exact
		case c.rule.Effect == Ask:
			asks = append(asks, c)
		case c.rule.Effect == Deny && c.rule.Overridable && c.err == nil:
			overridable = append(overridable, c)
		default: // Deny, and broken rules of unknown effect: fail closed
			denies = append(denies, c)
		}
	}
	if !exactAllow {
		// Only an allow naming this very path overrides the credential tier.
		denies = append(denies, overridable...)
		overridable = nil
	}
	switch {
	case len(denies) > 0:
		d.Reason = "denied by " + labels(denies)
		if others := append(append([]compiledRule(nil), asks...), allows...); len(others) > 0 {
			d.Reason += "; deny beats the matching " + labels(others)
		}
	case len(asks) > 0:
		d.Effect = Ask
		d.Reason = "approval required by " + labels(asks)
	case len(allows) > 0:
		d.Effect = Allow
		d.Reason = "allowed by " + labels(allows)
	default:
		d.Effect = Ask
		d.Reason = "no rule matched"
	}
	if len(overridable) > 0 {
		d.Reason += "; an allow of this exact path overrides " + labels(overridable)
	}
	return d
}
