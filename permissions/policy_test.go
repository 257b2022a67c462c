package permissions

import (
	"reflect"
	"strings"
	"testing"
)

func TestPolicyEvaluate(t *testing.T) {
	t.Parallel()
	vars := Vars{Workdir: "/w", Home: "/h", Artifacts: "/art"}
	allowData := Rule{Effect: Allow, Capability: "filesystem.read", Target: "/data/**", Reason: "datasets", Source: "p.json rule 1"}
	denyPrivate := Rule{Effect: Deny, Capability: "filesystem.*", Target: "/data/private/**", Reason: "private", Source: "p.json rule 2"}
	askDrafts := Rule{Effect: Ask, Capability: "*", Target: "/data/drafts/**", Reason: "drafts", Source: "p.json rule 3"}
	allowExec := Rule{Effect: Allow, Capability: "python.exec.stateful", Reason: "code", Source: "builtin"}
	denyAllReads := Rule{Effect: Deny, Capability: "filesystem.read", Reason: "no reads", Source: "x"}
	read := func(target string) ResolvedCapability {
		return ResolvedCapability{Name: FilesystemRead, Requested: target, Target: target}
	}
	exec := ResolvedCapability{Name: PythonExecStateful}

	tests := []struct {
		name        string
		rules       []Rule
		rc          ResolvedCapability
		wantEffect  Effect
		wantMatched []Rule
		wantReason  string
	}{
		{name: "allow", rules: []Rule{allowData, denyPrivate}, rc: read("/data/a.csv"),
			wantEffect: Allow, wantMatched: []Rule{allowData}, wantReason: `allowed by rule "datasets" (p.json rule 1)`},
		{name: "allow matches its root", rules: []Rule{allowData}, rc: read("/data"),
			wantEffect: Allow, wantMatched: []Rule{allowData}},
		{name: "deny beats allow", rules: []Rule{allowData, denyPrivate}, rc: read("/data/private/x"),
			wantEffect: Deny, wantMatched: []Rule{allowData, denyPrivate},
			wantReason: `denied by rule "private" (p.json rule 2); deny beats the matching rule "datasets" (p.json rule 1)`},
		{name: "deny beats allow whatever the order", rules: []Rule{denyPrivate, allowData}, rc: read("/data/private/x"),
			wantEffect: Deny, wantMatched: []Rule{denyPrivate, allowData}},
		{name: "ask beats allow", rules: []Rule{allowData, askDrafts}, rc: read("/data/drafts/d"),
			wantEffect: Ask, wantMatched: []Rule{allowData, askDrafts}, wantReason: `approval required by rule "drafts" (p.json rule 3)`},
		{name: "deny beats ask", rules: []Rule{askDrafts, {Effect: Deny, Capability: "*", Target: "/data/**", Reason: "d"}}, rc: read("/data/drafts/d"),
			wantEffect: Deny},
		{name: "no rule matched", rules: []Rule{allowData, denyPrivate}, rc: read("/elsewhere"),
			wantEffect: Ask, wantReason: "no rule matched"},
		{name: "prefix is not a parent", rules: []Rule{allowData}, rc: read("/database/x"),
			wantEffect: Ask},
		{name: "no rules", rc: exec, wantEffect: Ask, wantReason: "no rule matched"},
		{name: "empty target matches no target", rules: []Rule{allowExec}, rc: exec,
			wantEffect: Allow, wantMatched: []Rule{allowExec}},
		{name: "empty target matches any target", rules: []Rule{allowData, denyAllReads}, rc: read("/data/a"),
			wantEffect: Deny, wantMatched: []Rule{allowData, denyAllReads}},
		{name: "target pattern never matches no target", rules: []Rule{{Effect: Deny, Capability: "*", Target: "/**"}}, rc: exec,
			wantEffect: Ask},
		{name: "capability glob", rules: []Rule{denyPrivate}, rc: ResolvedCapability{Name: "filesystem.write", Target: "/data/private/x"},
			wantEffect: Deny},
		{name: "capability glob mismatch", rules: []Rule{denyPrivate}, rc: ResolvedCapability{Name: "network.fetch", Target: "/data/private/x"},
			wantEffect: Ask},
		{name: "problem is denied regardless", rules: []Rule{{Effect: Allow, Capability: "*"}},
			rc:         ResolvedCapability{Name: FilesystemRead, Requested: "gone", Problem: "cannot resolve path: no such file or directory"},
			wantEffect: Deny, wantReason: "cannot resolve path: no such file or directory"},
		{name: "relative target is denied", rules: []Rule{{Effect: Allow, Capability: "*"}}, rc: read("etc/shadow"),
			wantEffect: Deny, wantReason: "target is not an absolute canonical path"},
		{name: "variables", rules: []Rule{{Effect: Allow, Capability: "*", Target: "${artifacts}/**", Reason: "art"}}, rc: read("/art/s/plot.png"),
			wantEffect: Allow},
		{name: "duplicate labels shown once", rules: []Rule{
			{Effect: Deny, Capability: "*", Target: "/**/.ssh/**", Reason: "SSH keys", Source: "builtin"},
			{Effect: Deny, Capability: "*", Target: "${home}/.ssh/**", Reason: "SSH keys", Source: "builtin"},
		}, rc: read("/h/.ssh/id"), wantEffect: Deny, wantReason: `denied by rule "SSH keys" (builtin)`},
		{name: "rule without reason is named by content", rules: []Rule{{Effect: Deny, Capability: "*", Target: "/x/**"}}, rc: read("/x/y"),
			wantEffect: Deny, wantReason: `denied by rule "deny * /x/**"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := Policy{Rules: tt.rules}.Evaluate(tt.rc, vars)
			if d.Effect != tt.wantEffect {
				t.Errorf("Effect = %v, want %v (%s)", d.Effect, tt.wantEffect, d)
			}
			if tt.wantMatched != nil && !reflect.DeepEqual(d.Matched, tt.wantMatched) {
				t.Errorf("Matched = %v, want %v", d.Matched, tt.wantMatched)
			}
			if tt.wantReason != "" && d.Reason != tt.wantReason {
				t.Errorf("Reason = %q, want %q", d.Reason, tt.wantReason)
			}
			if d.Capability != tt.rc {
				t.Errorf("Capability = %+v, want %+v", d.Capability, tt.rc)
			}
		})
	}
}

func TestPolicyEvaluateBrokenRules(t *testing.T) {
	t.Parallel()
	read := ResolvedCapability{Name: FilesystemRead, Requested: "/w/a", Target: "/w/a"}
	exec := ResolvedCapability{Name: PythonExecStateful}
	allowWork := Rule{Effect: Allow, Capability: "filesystem.read", Target: "${workdir}/**", Reason: "work"}
	denySSH := Rule{Effect: Deny, Capability: "*", Target: "${home}/.ssh/**", Reason: "SSH keys"}
	allowExec := Rule{Effect: Allow, Capability: PythonExecStateful}
	tests := []struct {
		name       string
		rules      []Rule
		vars       Vars
		rc         ResolvedCapability
		wantEffect Effect
		wantReason string
	}{
		{name: "unset home fails closed for targets", rules: []Rule{allowWork, denySSH}, vars: Vars{Workdir: "/w"}, rc: read,
			wantEffect: Deny, wantReason: "${home} is not set"},
		{name: "unset home leaves targetless capabilities alone", rules: []Rule{denySSH, allowExec}, vars: Vars{Workdir: "/w"}, rc: exec,
			wantEffect: Allow},
		{name: "broken allow matches nothing", rules: []Rule{allowWork}, vars: Vars{Home: "/h"}, rc: read,
			wantEffect: Ask, wantReason: "no rule matched"},
		{name: "relative variable", rules: []Rule{allowWork}, vars: Vars{Workdir: "w"}, rc: read,
			wantEffect: Ask},
		{name: "broken ask fails closed", rules: []Rule{allowWork, {Effect: Ask, Capability: "*", Target: "${artifacts}/**"}}, vars: Vars{Workdir: "/w"}, rc: read,
			wantEffect: Ask, wantReason: "${artifacts} is not set"},
		{name: "zero rule denies everything", rules: []Rule{allowExec, {}}, rc: exec,
			wantEffect: Deny, wantReason: "missing effect"},
		{name: "invalid effect denies", rules: []Rule{allowWork, {Effect: 9, Capability: "filesystem.read"}}, vars: Vars{Workdir: "/w"}, rc: read,
			wantEffect: Deny, wantReason: "invalid effect 9"},
		{name: "malformed deny target fails closed", rules: []Rule{allowWork, {Effect: Deny, Capability: "*", Target: "relative/**"}}, vars: Vars{Workdir: "/w"}, rc: read,
			wantEffect: Deny, wantReason: "must be absolute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := Policy{Rules: tt.rules}.Evaluate(tt.rc, tt.vars)
			if d.Effect != tt.wantEffect || !strings.Contains(d.Reason, tt.wantReason) {
				t.Errorf("Evaluate = %s; want %v with reason containing %q", d, tt.wantEffect, tt.wantReason)
			}
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	full := Vars{Workdir: "/w", Home: "/h", Artifacts: "/a"}
	tests := []struct {
		name    string
		policy  Policy
		vars    Vars
		wantErr []string
	}{
		{name: "defaults", policy: DefaultPolicy(), vars: full},
		{name: "defaults without artifacts", policy: DefaultPolicy(), vars: Vars{Workdir: "/w", Home: "/h"}},
		{name: "defaults without home", policy: DefaultPolicy(), vars: Vars{Workdir: "/w"},
			wantErr: []string{"invalid policy", `rule 3, rule "SSH keys" (builtin): target "${home}/.ssh/**": ${home} is not set`}},
		{name: "every bad rule", policy: Policy{Rules: []Rule{{}, {Effect: Allow}, {Effect: Deny, Capability: "*", Target: "x"}}}, vars: full,
			wantErr: []string{"rule 1", "missing effect", "rule 2", "empty capability pattern", "rule 3", "must be absolute"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.policy.Validate(tt.vars)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate: no error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestDecisionString(t *testing.T) {
	t.Parallel()
	rule := Rule{Effect: Deny, Capability: "*", Target: "/etc/shadow", Reason: "system secrets", Source: "builtin"}
	tests := []struct {
		name string
		d    Decision
		want string
	}{
		{name: "target", d: Decision{Capability: ResolvedCapability{Name: FilesystemRead, Requested: "/etc/shadow", Target: "/etc/shadow"}, Effect: Deny, Matched: []Rule{rule}, Reason: `denied by rule "system secrets" (builtin)`},
			want: `deny filesystem.read on /etc/shadow: denied by rule "system secrets" (builtin)`},
		{name: "via symlink", d: Decision{Capability: ResolvedCapability{Name: FilesystemRead, Requested: "data/link", Target: "/etc/shadow"}, Effect: Deny, Reason: "r"},
			want: `deny filesystem.read on /etc/shadow (requested as "data/link"): r`},
		{name: "no target", d: Decision{Capability: ResolvedCapability{Name: PythonExecStateful}, Effect: Allow, Reason: "r"},
			want: `allow python.exec.stateful: r`},
		{name: "problem", d: Decision{Capability: ResolvedCapability{Name: FilesystemRead, Requested: "gone.csv", Problem: "p"}, Effect: Deny, Reason: "p"},
			want: `deny filesystem.read on "gone.csv": p`},
		{name: "empty path problem", d: Decision{Capability: ResolvedCapability{Name: FilesystemRead, Problem: "p"}, Effect: Deny, Reason: "p"},
			want: `deny filesystem.read on "": p`},
		{name: "control characters are quoted", d: Decision{Capability: ResolvedCapability{Name: FilesystemRead, Requested: "/w/a\nAllow", Target: "/w/a\nAllow"}, Effect: Ask, Reason: "r"},
			want: `ask filesystem.read on "/w/a\nAllow": r`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.d.String(); got != tt.want {
				t.Errorf("String() =\n  %s\nwant\n  %s", got, tt.want)
			}
		})
	}
}

func TestRuleString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rule Rule
		want string
	}{
		{Rule{Effect: Deny, Capability: "*", Target: "/etc/shadow", Reason: "system secrets", Source: "builtin"}, `deny * /etc/shadow "system secrets" (builtin)`},
		{Rule{Effect: Allow, Capability: "python.exec.stateful"}, `allow python.exec.stateful`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			if got := tt.rule.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEffect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		effect Effect
		text   string
	}{
		{Allow, "allow"},
		{Deny, "deny"},
		{Ask, "ask"},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			t.Parallel()
			if tt.effect.String() != tt.text {
				t.Errorf("String() = %q, want %q", tt.effect.String(), tt.text)
			}
			b, err := tt.effect.MarshalText()
			if err != nil || string(b) != tt.text {
				t.Errorf("MarshalText() = %q, %v", b, err)
			}
			var e Effect
			if err := e.UnmarshalText([]byte(tt.text)); err != nil || e != tt.effect {
				t.Errorf("UnmarshalText(%q) = %v, %v", tt.text, e, err)
			}
		})
	}
	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		if got := Effect(0).String(); got != "Effect(0)" {
			t.Errorf("String() = %q", got)
		}
		if _, err := Effect(0).MarshalText(); err == nil {
			t.Error("MarshalText of the zero Effect succeeded")
		}
		for _, s := range []string{"", "Allow", "permit", "allow "} {
			var e Effect
			if err := e.UnmarshalText([]byte(s)); err == nil {
				t.Errorf("UnmarshalText(%q) succeeded", s)
			}
		}
	})
}
