package permissions

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestFilesCapabilities: the files API's capabilities are allowed by the
// defaults, turned off by a deny rule (which beats the built-in allow) or by a
// policy without the defaults, and are not touched by host-path rules.
func TestFilesCapabilities(t *testing.T) {
	t.Parallel()
	parse := func(t *testing.T, src string) Policy {
		t.Helper()
		p, err := ParsePolicy(strings.NewReader(src), "test.json")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name        string
		policy      string
		read, write Effect
		reason      string // in the files.write decision's reason
	}{
		{name: "defaults", policy: `{}`, read: Allow, write: Allow, reason: "upload and delete"},
		{name: "deny write", policy: `{"rules": [{"effect": "deny", "capability": "files.write", "reason": "read-only files API"}]}`,
			read: Allow, write: Deny, reason: "read-only files API"},
		{name: "deny all files", policy: `{"rules": [{"effect": "deny", "capability": "files.*", "reason": "no files API"}]}`,
			read: Deny, write: Deny, reason: "no files API"},
		{name: "ask write without approver", policy: `{"rules": [{"effect": "ask", "capability": "files.write"}]}`,
			read: Allow, write: Deny, reason: "fail closed"},
		{name: "no defaults", policy: `{"defaults": false, "rules": [{"effect": "allow", "capability": "python.exec.stateful"}]}`,
			read: Deny, write: Deny, reason: "no rule"},
		{name: "no defaults, read only", policy: `{"defaults": false, "rules": [{"effect": "allow", "capability": "files.read"}]}`,
			read: Allow, write: Deny},
		{name: "host path denies do not reach files", policy: `{"rules": [{"effect": "deny", "capability": "*", "target": "/**", "reason": "no host files"}]}`,
			read: Allow, write: Allow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &Engine{Policy: parse(t, tt.policy), Vars: Vars{Workdir: "/fake/work", Home: "/fake/home"}}
			for _, c := range []struct {
				read, write bool
				want        Effect
			}{{true, false, tt.read}, {false, true, tt.write}} {
				report, err := e.Check(context.Background(), FilesCapabilities(c.read, c.write), nil)
				if len(report.Decisions) != 1 {
					t.Fatalf("read=%v write=%v: %d decisions, want 1", c.read, c.write, len(report.Decisions))
				}
				d := report.Decisions[0]
				if d.Effect != c.want {
					t.Errorf("%s: %s, want %v", d.Capability.Name, d, c.want)
				}
				if denied := errors.Is(err, ErrDenied); denied != (c.want == Deny) {
					t.Errorf("%s: error %v, want denied=%v", d.Capability.Name, err, c.want == Deny)
				}
				if c.write && !strings.Contains(d.Reason, tt.reason) {
					t.Errorf("files.write reason %q does not contain %q", d.Reason, tt.reason)
				}
			}
		})
	}
	if got := FilesCapabilities(true, true); len(got) != 2 || got[0].Name != FilesRead || got[1].Name != FilesWrite {
		t.Errorf("FilesCapabilities(true, true) = %v", got)
	}
}
