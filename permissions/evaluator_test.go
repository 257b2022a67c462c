package permissions

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvaluator: the batch function decides as Check does for each path, naming
// the rule, without asking: credential names anywhere below an allowed
// directory are denied, an exact allow re-opens one, and no rule is Ask.
func TestEvaluator(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	work := filepath.Join(root, "work")
	allowed := filepath.Join(work, "fixtures", "server.pem")
	// The files exist, so that Check, which resolves them, decides them too.
	for _, f := range []string{".env", "nested/id_rsa", "nested/a.csv", "fixtures/server.pem", "other.pem"} {
		p := filepath.Join(work, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := &Engine{
		Policy: NewPolicy(append(DefaultRules(), Rule{Effect: Allow, Capability: FilesystemRead, Target: allowed, Reason: "fixture"})...),
		Vars:   Vars{Workdir: work, Home: filepath.Join(root, "home")},
	}
	eval := e.Evaluator(FilesystemRead)
	for target, want := range map[string]string{
		filepath.Join(work, ".env"):             `deny: denied by rule "environment files" (builtin)`,
		filepath.Join(work, "nested", "id_rsa"): `deny: denied by rule "SSH keys" (builtin)`,
		filepath.Join(work, "nested", "a.csv"):  "allow",
		allowed:                                 "allow",
		filepath.Join(work, "other.pem"):        `deny: denied by rule "private keys and keystores" (builtin)`,
		"/elsewhere/a.csv":                      "ask: no rule matched",
	} {
		d := eval(target)
		got := d.Effect.String()
		if d.Effect != Allow {
			got += ": " + d.Reason
		}
		if !strings.HasPrefix(got, want) {
			t.Errorf("%s: got %q, want %q", target, got, want)
		}
		if d.Effect == Allow || d.Effect == Deny {
			rep, _ := e.Check(context.Background(), []Capability{{Name: FilesystemRead, TargetArg: "p"}}, map[string]any{"p": target})
			if c := rep.Decisions[0].Effect; c != d.Effect {
				t.Errorf("%s: Check says %s, the evaluator %s", target, c, d.Effect)
			}
		}
	}
}
