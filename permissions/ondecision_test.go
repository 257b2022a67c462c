package permissions

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
)

// TestOnDecision checks that the hook sees every settled decision, allowed or not,
// with asks already settled by the approver.
func TestOnDecision(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var mu sync.Mutex
	var seen []Decision
	e := &Engine{
		Policy: DefaultPolicy(),
		Vars:   f.vars(),
		OnDecision: func(d Decision) {
			mu.Lock()
			seen = append(seen, d)
			mu.Unlock()
		},
	}
	args := map[string]any{InputsArg: []string{
		filepath.Join(f.work, "a.csv"),
		filepath.Join(f.home, ".ssh", "id_ed25519"),
		filepath.Join(f.outside, "report.csv"), // no rule: an ask, settled as deny
	}}
	_, err := e.Check(context.Background(), ExecuteCapabilities(), args)
	if !errors.Is(err, ErrDenied) {
		t.Fatalf("Check: got %v, want a denial", err)
	}
	want := []struct {
		name   string
		effect Effect
	}{
		{PythonExecStateful, Allow},
		{FilesystemRead, Allow},
		{FilesystemRead, Deny},
		{FilesystemRead, Deny},
	}
	if len(seen) != len(want) {
		t.Fatalf("hook saw %d decisions, want %d: %v", len(seen), len(want), seen)
	}
	for i, w := range want {
		if seen[i].Capability.Name != w.name || seen[i].Effect != w.effect {
			t.Errorf("decision %d: got %s %s, want %s %s", i, seen[i].Effect, seen[i].Capability.Name, w.effect, w.name)
		}
	}
}
