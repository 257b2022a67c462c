package permissions

import (
	"errors"
	"fmt"
)

// Policy is an ordered set of rules. The zero Policy has no rules, so every
// capability is Ask and, without an Approver, denied; DefaultPolicy is the usual
// starting point. A Policy is only read, so it is safe for concurrent use as long as
// nobody modifies its Rules.
//
// A Policy made by NewPolicy, DefaultPolicy or ParsePolicy parses its rules once, on
// first use, and so do its copies, including a copy given a new Rules slice: assign
// a new slice rather than change the elements of one in use. A Policy written as a
// literal works the same but parses its rules on every use.
type Policy struct {
	// Rules are evaluated all together; their order only orders Decision.Matched.
	Rules []Rule

	cache *ruleCache // shared by copies; nil: parse on every use
}

// NewPolicy returns a Policy holding rules, which parses them once, on first use.
func NewPolicy(rules ...Rule) Policy {
	return Policy{Rules: rules, cache: &ruleCache{}}
}

// DefaultPolicy returns a Policy holding DefaultRules.
func DefaultPolicy() Policy {
	return NewPolicy(DefaultRules()...)
}

// ruleSet returns the parsed rules, from the cache when the Policy has one.
func (p Policy) ruleSet() *ruleSet {
	if p.cache == nil {
		return parseRules(p.Rules)
	}
	return p.cache.get(p.Rules)
}

// Evaluate decides rc with vars as the values of the patterns' variables. It is a
// pure function: it reads neither the file system nor the environment, and rc.Target
// must already be canonical (see Resolve).
//
// Every rule is evaluated, so Decision.Matched lists all that match. A capability
// with a Problem is denied. Otherwise any matching deny rule denies; else any
// matching ask rule asks; else any matching allow rule allows; and when no rule
// matches the answer is Ask, which Engine.Check turns into a question for its
// Approver and, without one, a denial.
//
// A rule that cannot be evaluated (invalid effect, empty capability pattern,
// malformed target, or a target whose variable is unset or relative in vars) fails
// closed: a broken allow rule matches nothing, and any other broken rule matches
// every capability its capability pattern names that has a target, so that a typo in
// a deny rule, or a forgotten Vars.Home, denies loudly instead of letting a secret
// through. Validate reports such rules ahead of time.
func (p Policy) Evaluate(rc ResolvedCapability, vars Vars) Decision {
	return evaluate(compileRules(p.ruleSet().all, vars, false), rc)
}

// Validate reports every rule of p that Evaluate could not use with vars, naming
// each by its index, reason and source. Use it when loading a policy to fail at start-up
// rather than at the first call.
func (p Policy) Validate(vars Vars) error {
	var errs []error
	for i, r := range p.ruleSet().all {
		c := r.compile(vars, nil)
		if c.err == nil {
			continue
		}
		errs = append(errs, fmt.Errorf("rule %d, %s: %w", i+1, r.rule.label(), c.err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid policy: %w", errors.Join(errs...))
	}
	return nil
}
