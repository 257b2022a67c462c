package permissions

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
)

// A Policy parses its rules once; a copy given new Rules (as the executor adds its
// own deny rule) is parsed for those, and the original keeps its answers.
func TestRuleCacheFollowsReplacedRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := &Engine{Policy: DefaultPolicy(), Vars: f.vars()}
	args := map[string]any{"inputs": "a.csv"}
	if _, err := base.Check(context.Background(), ExecuteCapabilities(), args); err != nil {
		t.Fatalf("base engine: %v", err)
	}
	set := base.Policy.ruleSet()
	if again := base.Policy.ruleSet(); again != set {
		t.Error("the rules were parsed twice")
	}

	guarded := *base
	guarded.Policy.Rules = append(append([]Rule(nil), base.Policy.Rules...),
		Rule{Effect: Deny, Capability: "*", Target: filepath.Join(f.work, "**"), Reason: "guard"})
	if _, err := guarded.Check(context.Background(), ExecuteCapabilities(), args); !errors.Is(err, ErrDenied) {
		t.Fatalf("guarded engine: %v, want the added rule to deny", err)
	}
	if guarded.Policy.ruleSet() == set {
		t.Error("the copy with new rules used the original's parsed rules")
	}
	if _, err := base.Check(context.Background(), ExecuteCapabilities(), args); err != nil {
		t.Fatalf("base engine after the copy: %v", err)
	}
	if base.Policy.ruleSet() != set {
		t.Error("the original's parsed rules were dropped")
	}
}

// Checks on one Engine from many goroutines share the parsed rules safely (run
// with -race).
func TestRuleCacheConcurrentChecks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e := &Engine{Policy: NewPolicy(DefaultRules()...), Vars: f.vars()}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			args := map[string]any{"inputs": "a.csv"}
			if i%2 == 1 {
				args = map[string]any{"inputs": "innocent.csv"} // a link to an SSH key
			}
			_, err := e.Check(context.Background(), ExecuteCapabilities(), args)
			if denied := errors.Is(err, ErrDenied); denied != (i%2 == 1) {
				t.Errorf("check %d: %v", i, err)
			}
		})
	}
	wg.Wait()
}

// A Policy literal has no cache and parses on every use, with the same answers.
func TestPolicyLiteralParsesEachTime(t *testing.T) {
	t.Parallel()
	p := Policy{Rules: DefaultRules()}
	if p.ruleSet() == p.ruleSet() {
		t.Error("a Policy literal cached its rules")
	}
	if len(p.ruleSet().all) != len(p.Rules) {
		t.Error("parsed rule count differs")
	}
}

func TestRuleCacheIsBounded(t *testing.T) {
	t.Parallel()
	var c ruleCache
	for range 3 * maxRuleSets {
		c.get([]Rule{{Effect: Allow, Capability: "*"}})
	}
	if len(c.sets) != maxRuleSets {
		t.Errorf("cache holds %d rule sets, want at most %d", len(c.sets), maxRuleSets)
	}
}
