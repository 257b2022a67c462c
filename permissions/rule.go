package permissions

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Rule allows, denies or asks about the capabilities whose name matches Capability
// and whose canonical target matches Target.
type Rule struct {
	// Effect is what the rule does when it matches.
	Effect Effect `json:"effect"`

	// Capability is a glob on the capability name: "filesystem.read",
	// "filesystem.*", "*". * matches any run of characters, ? one character.
	Capability string `json:"capability"`

	// Target is a glob on the canonical target path (see the package comment for
	// its syntax), or "" to match any target and also no target. A non-empty
	// Target never matches a capability without target.
	Target string `json:"target,omitempty"`

	// Reason says why the rule exists, in words that fit in "denied by rule
	// "<Reason>"". It names the rule in decisions, errors and logs.
	Reason string `json:"reason,omitempty"`

	// IgnoreCase makes Target match without regard to letter case, so that a
	// pattern on "*.pem" also covers SERVER.PEM. Variables' values are compared
	// the same way.
	IgnoreCase bool `json:"ignore_case,omitempty"`

	// Overridable marks a deny rule as the built-in credential tier: it yields to
	// an allow rule whose Target is one exact path (no wildcard) equal to the
	// target, written by someone on purpose. Every other deny rule beats every
	// allow. It is not read from a policy file; DefaultRules sets it.
	Overridable bool `json:"-"`

	// Source says where the rule came from: "builtin", "policy.json rule 3".
	// It is not read from a policy file; the loader sets it.
	Source string `json:"-"`
}

// String describes the rule, such as `deny * /etc/shadow "system secrets" (builtin)`.
func (r Rule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Effect, r.Capability)
	if r.Target != "" {
		fmt.Fprintf(&b, " %s", r.Target)
	}
	if r.Reason != "" {
		fmt.Fprintf(&b, " %q", r.Reason)
	}
	if r.Source != "" {
		fmt.Fprintf(&b, " (%s)", r.Source)
	}
	return b.String()
}

// label names the rule in a reason: `rule "system secrets" (builtin)`, or by its
// content when it has no Reason.
func (r Rule) label() string {
	name := r.Reason
	if name == "" {
		name = fmt.Sprintf("%s %s", r.Effect, r.Capability)
		if r.Target != "" {
			name += " " + r.Target
		}
	}
	if r.Source == "" {
		return fmt.Sprintf("rule %q", name)
	}
	return fmt.Sprintf("rule %q (%s)", name, r.Source)
}

// Validate checks the rule's syntax: a known effect, a non-empty capability pattern,
// and an absolute, well-formed target pattern. It does not need the variables' values.
func (r Rule) Validate() error {
	if !r.Effect.valid() {
		if r.Effect == 0 {
			return errors.New("missing effect (want allow, deny or ask)")
		}
		return fmt.Errorf("invalid effect %d", uint8(r.Effect))
	}
	if r.Capability == "" {
		return errors.New("empty capability pattern")
	}
	if r.Target != "" {
		if _, err := parsePattern(r.Target); err != nil {
			return fmt.Errorf("target %q: %w", r.Target, err)
		}
	}
	return nil
}

// compiledRule is a rule ready to be matched: its pattern parsed and its variables
// expanded. A rule that cannot be (broken) has err set; see compileRules.
type compiledRule struct {
	rule Rule
	err  error
	// alts are the pattern's alternative element lists; a target matching any of
	// them matches the rule. With rule.IgnoreCase their text is lower case.
	alts [][]elem
	// exact says the pattern names one path: every element is literal.
	exact bool
}

// compileRules prepares parsed rules for evaluation with vars. With resolveDeny,
// the literal leading part of every deny and ask pattern is also resolved through
// symlinks and matched as an alternative, so that "deny ${home}/.ssh/**" still
// covers the keys when ~/.ssh is a symlink to elsewhere.
//
// Allow patterns are never resolved that way, on purpose: whoever can replace a
// directory named in an allow pattern by a symlink (code running in a session whose
// directory an allow rule names, say) could otherwise point the allow at "/". An
// allow pattern therefore matches only targets that really live where it says.
// Resolving deny and ask patterns can only make a decision stricter.
func compileRules(rules []parsedRule, vars Vars, resolveDeny bool) []compiledRule {
	var resolved pathResolver
	if resolveDeny {
		resolved = pathResolver{}
	}
	out := make([]compiledRule, len(rules))
	for i, r := range rules {
		out[i] = r.compile(vars, resolved)
	}
	return out
}

// compile expands the rule's variables with vars; with resolved non-nil, a deny or
// ask pattern also gets its resolved alternative (see compileRules).
func (p parsedRule) compile(vars Vars, resolved pathResolver) compiledRule {
	c := compiledRule{rule: p.rule, err: p.err}
	if c.err != nil || p.rule.Target == "" {
		return c
	}
	elems, err := p.pattern.expand(vars)
	if err != nil {
		c.err = fmt.Errorf("target %q: %w", p.rule.Target, err)
		return c
	}
	c.exact = literalPrefix(elems) == len(elems)
	c.alts = [][]elem{elems}
	if resolved != nil && p.rule.Effect != Allow {
		n := literalPrefix(elems)
		names := make([]string, n)
		for i, e := range elems[:n] {
			names[i] = e.text
		}
		prefix := string(filepath.Separator) + filepath.Join(names...)
		if real := resolved.resolve(prefix); real != filepath.Clean(prefix) {
			alt := make([]elem, 0, len(elems))
			for _, name := range splitPath(real) {
				alt = append(alt, elem{kind: elemLiteral, text: name})
			}
			c.alts = append(c.alts, append(alt, elems[n:]...))
		}
	}
	if p.rule.IgnoreCase {
		for i, alt := range c.alts {
			c.alts[i] = foldElems(alt)
		}
	}
	return c
}

// foldElems returns a copy of elems with their text in lower case.
func foldElems(elems []elem) []elem {
	out := make([]elem, len(elems))
	for i, e := range elems {
		out[i] = elem{kind: e.kind, text: strings.ToLower(e.text)}
	}
	return out
}

// matches reports whether the rule applies to rc. A broken rule (err set) applies,
// failing closed, to every capability its Capability glob matches (every capability
// if that is empty) that has a target, or any capability if it has no Target
// pattern; Evaluate never asks this of a broken allow rule, which matches nothing.
func (c compiledRule) matches(rc ResolvedCapability, t *targetElems) bool {
	if c.err == nil || c.rule.Capability != "" {
		if !matchWildcard(c.rule.Capability, rc.Name) {
			return false
		}
	}
	if c.rule.Target == "" {
		return true
	}
	if rc.Target == "" {
		return false
	}
	if c.err != nil {
		return true
	}
	names := t.get(rc.Target, c.rule.IgnoreCase)
	for _, alt := range c.alts {
		if matchElems(alt, names) {
			return true
		}
	}
	return false
}

// targetElems holds a target's path elements, as given and lower-cased, split
// once for all the rules that evaluate matches it with (splitting per rule was
// most of the time an evaluation took).
type targetElems struct {
	names, lower []string
	split, low   bool
}

func (t *targetElems) get(target string, ignoreCase bool) []string {
	if ignoreCase {
		if !t.low {
			t.lower, t.low = splitPath(strings.ToLower(target)), true
		}
		return t.lower
	}
	if !t.split {
		t.names, t.split = splitPath(target), true
	}
	return t.names
}
