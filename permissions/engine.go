package permissions

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// Engine checks the capabilities of tool calls against a Policy, asks its Approver
// about those no rule settles, and logs every decision. The zero Engine works: it has
// no rules, so it denies everything.
//
// An Engine is safe for concurrent use if its Approver is, provided its fields are
// not changed while it is in use.
type Engine struct {
	// Policy holds the rules. The zero Policy has none; see DefaultPolicy.
	Policy Policy

	// Vars are the working directory, home and artifacts directories. Relative
	// paths are resolved against Vars.Workdir, and fail without it. Home defaults
	// to os.UserHomeDir. Each value is canonicalized before use.
	Vars Vars

	// Approver settles decisions that no rule settled. Nil denies them (fail
	// closed).
	Approver Approver

	// Logger receives one record per decision. Nil discards them.
	Logger *slog.Logger

	// OnDecision, when set, is called with every decision Check settles (after
	// the Approver, so its Effect is Allow or Deny), for example to count them
	// for metrics. It is called on Check's goroutine and must be fast and safe
	// for concurrent use.
	OnDecision func(Decision)
}

// Report holds the decisions of one Engine.Check, in the order the capabilities were
// resolved: declaration order, then argument order within a list.
type Report struct {
	// Decisions holds one decision per resolved capability, allowed or not.
	Decisions []Decision
}

// Allowed returns, in input order, the allowed capabilities with the given name. For
// FilesystemRead each one's Target is the canonical path to copy and its Requested the
// path as given (whose base name is the name to stage it under).
func (r Report) Allowed(name string) []ResolvedCapability {
	var out []ResolvedCapability
	for _, d := range r.Decisions {
		if d.Effect == Allow && d.Capability.Name == name {
			out = append(out, d.Capability)
		}
	}
	return out
}

// Denied returns the decisions that denied, in order.
func (r Report) Denied() []Decision {
	var out []Decision
	for _, d := range r.Decisions {
		if d.Effect != Allow {
			out = append(out, d)
		}
	}
	return out
}

// Check decides whether a call with args may use the capabilities caps. It resolves
// them (see Resolve) against the working directory, evaluates each against the policy
// (see Policy.Evaluate; here deny and ask patterns also match through symlinked
// directories), asks the Approver about each Ask, and logs every decision.
//
// It returns every decision. If any was denied, the error is a *DeniedError wrapping
// ErrDenied, and the caller must not proceed with the denied capabilities; callers
// that stage files should stage only what Report.Allowed returns. An argument error
// from Resolve wraps ErrInvalidArgument and comes with an empty Report.
func (e *Engine) Check(ctx context.Context, caps []Capability, args map[string]any) (Report, error) {
	rcs, err := Resolve(caps, args, e.Vars.Workdir)
	if err != nil {
		return Report{}, fmt.Errorf("check permissions: %w", err)
	}
	set := e.Policy.ruleSet()
	var rules []compiledRule
	if hasTarget(rcs) {
		rules = compileRules(set.all, e.vars(), true)
	} else {
		// A rule with a target never matches a capability without one, so a call
		// that names no path (the common case: run code, no inputs) needs neither
		// the target patterns nor the file system lookups that compiling them
		// does.
		rules = compileRules(set.targetless, Vars{}, false)
	}
	log := e.logger()
	report := Report{Decisions: make([]Decision, 0, len(rcs))}
	var denied []Decision
	for _, rc := range rcs {
		d := evaluate(rules, rc)
		if d.Effect == Ask {
			d = e.ask(ctx, d)
		}
		logDecision(ctx, log, d)
		if e.OnDecision != nil {
			e.OnDecision(d)
		}
		report.Decisions = append(report.Decisions, d)
		if d.Effect != Allow {
			denied = append(denied, d)
		}
	}
	if len(denied) > 0 {
		return report, &DeniedError{Decisions: denied}
	}
	return report, nil
}

// ask settles an Ask decision with the Approver, failing closed.
func (e *Engine) ask(ctx context.Context, d Decision) Decision {
	out := d
	out.Effect = Deny
	if e.Approver == nil {
		out.Reason = d.Reason + " and no approver is configured (fail closed)"
		return out
	}
	ok, err := e.Approver.Approve(ctx, d)
	switch {
	case err != nil:
		out.Reason = fmt.Sprintf("%s; approval failed: %v (fail closed)", d.Reason, err)
	case ok:
		out.Effect = Allow
		out.Reason = d.Reason + "; approved by operator"
	default:
		out.Reason = d.Reason + "; refused by operator"
	}
	return out
}

// vars returns the Engine's variables with defaults applied and symlinks resolved.
func (e *Engine) vars() Vars {
	v := e.Vars
	if v.Home == "" {
		if h, err := os.UserHomeDir(); err == nil {
			v.Home = h
		}
	}
	return v.canonical()
}

// logger returns the configured logger or one that discards.
func (e *Engine) logger() *slog.Logger {
	if e.Logger != nil {
		return e.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// logDecision records d: allowed at Debug (one per call would flood a busy server), denied at Warn.
func logDecision(ctx context.Context, log *slog.Logger, d Decision) {
	level := slog.LevelDebug
	if d.Effect != Allow {
		level = slog.LevelWarn
	}
	if !log.Enabled(ctx, level) {
		return
	}
	// Several rules often share a reason and source ("SSH keys", "builtin"); list
	// each pair once.
	var reasons, sources []string
	seen := make(map[[2]string]bool, len(d.Matched))
	for _, r := range d.Matched {
		if k := [2]string{r.Reason, r.Source}; !seen[k] {
			seen[k] = true
			reasons, sources = append(reasons, r.Reason), append(sources, r.Source)
		}
	}
	log.LogAttrs(ctx, level, "permission decision",
		slog.String("capability", d.Capability.Name),
		slog.String("target", d.Capability.Target),
		slog.String("requested", d.Capability.Requested),
		slog.String("effect", d.Effect.String()),
		slog.String("rule", strings.Join(reasons, "; ")),
		slog.String("source", strings.Join(sources, "; ")),
		slog.String("reason", d.Reason),
	)
}

func hasTarget(rcs []ResolvedCapability) bool {
	for _, rc := range rcs {
		if rc.Target != "" || rc.Problem != "" {
			return true
		}
	}
	return false
}
