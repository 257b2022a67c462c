package permissions

// Evaluator returns a function that decides the capability name on canonical
// target paths with e's policy, its rules compiled once, for judging many paths
// the way Check judges one: every entry below a directory that Check allowed, as
// the executor judges the files of a data mount. The function neither resolves
// the target (it must be canonical: absolute, no symbolic link on it, such as a
// path below a Target that Check returned, reached without following links),
// nor asks the Approver (an Ask is returned as is), nor logs. The rules are
// compiled, deny and ask patterns resolved through symbolic links as Check
// does, when Evaluator is called: use the function for one batch of paths,
// then drop it. It is safe for concurrent use.
func (e *Engine) Evaluator(name string) func(target string) Decision {
	rules := compileRules(e.Policy.ruleSet().all, e.vars(), true)
	return func(target string) Decision {
		return evaluate(rules, ResolvedCapability{Name: name, Requested: target, Target: target})
	}
}
