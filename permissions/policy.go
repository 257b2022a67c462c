package permissions

import (
	"errors"
	"fmt"
)

// Policy is an ordered set of rules. The zero Policy has no rules, so every
// capability is Ask and, without an Approver, denied; DefaultPolicy is the usual
// starting point. A Policy is only read, so it is safe for concurrent use as long as
// nobody modifies its Rules.
type Policy struct {
	// Rules are evaluated all together; their order only orders Decision.Matched.
	Rules []Rule
}

// DefaultPolicy returns a Policy holding DefaultRules.
func DefaultPolicy() Policy {
	return Policy{Rules: DefaultRules()}
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
	return evaluate(compileRules(p.Rules, vars, false), rc)
}

// Validate reports every rule of p that Evaluate could not use with vars, naming
// each by its index, reason and source. Use it when loading a policy to fail at start-up
// rather than at the first call.
func (p Policy) Validate(vars Vars) error {
	var errs []error
	for i, r := range p.Rules {
		c := compileRule(r, vars, false)
		if c.err == nil {
			continue
		}
		errs = append(errs, fmt.Errorf("rule %d, %s: %w", i+1, r.label(), c.err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid policy: %w", errors.Join(errs...))
	}
	return nil
}
