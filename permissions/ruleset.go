package permissions

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// A policy's rules are prepared for matching in two stages. Parsing (validating
// each rule and parsing its target pattern) depends only on the rules, so it is
// done once per Policy and cached (ruleSet, ruleCache). Compiling (expanding the
// variables and resolving deny and ask patterns through symlinks, see
// compileRules) reads the file system, so Check does it each time: a directory a
// deny rule names may become a symlink at any moment, and an answer kept from an
// earlier Check would let a target reached through it escape the rule.

// parsedRule is a rule validated and with its target pattern parsed.
type parsedRule struct {
	rule    Rule
	err     error       // why the rule is broken, or nil
	pattern pathPattern // the parsed Target, when err is nil and Target is set
}

// parseRule validates r and parses its target pattern.
func parseRule(r Rule) parsedRule {
	p := parsedRule{rule: r}
	if err := r.Validate(); err != nil {
		p.err = err
		return p
	}
	if r.Target == "" {
		return p
	}
	pat, err := parsePattern(r.Target)
	if err != nil {
		p.err = err
		return p
	}
	p.pattern = pat
	return p
}

// ruleSet is a policy's rules parsed, in order. It is immutable once built.
type ruleSet struct {
	all []parsedRule
	// targetless are the rules without a Target, in order: all that can match a
	// capability without a target.
	targetless []parsedRule
}

// parseRules parses rules.
func parseRules(rules []Rule) *ruleSet {
	s := &ruleSet{all: make([]parsedRule, len(rules))}
	for i, r := range rules {
		s.all[i] = parseRule(r)
		if r.Target == "" {
			s.targetless = append(s.targetless, s.all[i])
		}
	}
	return s
}

// maxRuleSets bounds the rule sets one ruleCache keeps.
const maxRuleSets = 4

// ruleCache keeps the parsed rules of a Policy and of the Policies copied from it
// with their Rules replaced (as the executor does to add its own deny rule): a
// copy shares the cache, and each Rules slice is parsed once, on first use. A
// Rules slice is recognised by its identity (first element and length), which is
// why a Policy's Rules must not be modified in place once it is in use. It is
// safe for concurrent use.
type ruleCache struct {
	mu   sync.Mutex
	sets []cachedRuleSet // most recently added last
}

// cachedRuleSet is the parsed form of the rules slice starting at first, n long.
type cachedRuleSet struct {
	first *Rule
	n     int
	set   *ruleSet
}

// get returns the parsed form of rules, parsing them on first use.
func (c *ruleCache) get(rules []Rule) *ruleSet {
	if len(rules) == 0 {
		return &ruleSet{}
	}
	first, n := &rules[0], len(rules)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sets {
		if s.first == first && s.n == n {
			return s.set
		}
	}
	set := parseRules(rules)
	if len(c.sets) == maxRuleSets {
		c.sets = append(c.sets[:0], c.sets[1:]...)
	}
	c.sets = append(c.sets, cachedRuleSet{first: first, n: n, set: set})
	return set
}

// pathResolver is resolveExisting remembering its answers, for one compilation of
// a policy: the deny patterns share leading directories (${home}, /etc), and each
// directory is then looked at once instead of once per pattern.
type pathResolver map[string]string

// resolve is resolveExisting(p) for a clean absolute p. It resolves p's parent
// (remembered), then looks at p's last element there: a symlink is followed, and
// anything else - an element that does not exist, or that cannot be looked at -
// is joined on unchanged. That is what filepath.EvalSymlinks gives for a path that
// exists, and resolveExisting's answer for one that does not.
func (m pathResolver) resolve(p string) string {
	if r, ok := m[p]; ok {
		return r
	}
	dir, base := filepath.Dir(p), filepath.Base(p)
	var r string
	if dir == p { // the root
		r = p
		if real, err := filepath.EvalSymlinks(p); err == nil {
			r = real
		}
	} else {
		r = filepath.Join(m.resolve(dir), base)
		if fi, err := os.Lstat(r); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if real, err := filepath.EvalSymlinks(r); err == nil {
				r = real
			}
		}
	}
	m[p] = r
	return r
}
