package permissions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fixture is a fake host: a working directory, a home with credentials, and files
// elsewhere, all under one temp dir.
type fixture struct {
	root, work, home, outside string
}

func newFixture(tb testing.TB) fixture {
	tb.Helper()
	root := tempDir(tb)
	f := fixture{
		root:    root,
		work:    filepath.Join(root, "work"),
		home:    filepath.Join(root, "home"),
		outside: filepath.Join(root, "outside"),
	}
	writeFile(tb, filepath.Join(f.work, "a.csv"))
	writeFile(tb, filepath.Join(f.work, "sub", "b.csv"))
	writeFile(tb, filepath.Join(f.work, "secrets", "token.txt"))
	writeFile(tb, filepath.Join(f.home, ".ssh", "id_ed25519"))
	writeFile(tb, filepath.Join(f.home, ".aws", "credentials"))
	writeFile(tb, filepath.Join(f.outside, "report.csv"))
	symlink(tb, filepath.Join(f.home, ".ssh", "id_ed25519"), filepath.Join(f.work, "innocent.csv"))
	symlink(tb, filepath.Join(f.work, "innocent.csv"), filepath.Join(f.work, "sub", "also-innocent.csv"))
	symlink(tb, filepath.Join(f.outside, "report.csv"), filepath.Join(f.work, "report.csv"))
	symlink(tb, filepath.Join(f.root, "missing"), filepath.Join(f.work, "dangling.csv"))
	return f
}

func (f fixture) vars() Vars { return Vars{Workdir: f.work, Home: f.home} }

// approver records the decisions it is asked about and answers with ok, err.
type approver struct {
	mu    sync.Mutex
	asked []Decision
	ok    bool
	err   error
}

func (a *approver) Approve(_ context.Context, d Decision) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, d)
	return a.ok, a.err
}

func TestEngineCheck(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	type want struct {
		effect Effect
		target string
		reason string
	}
	tests := []struct {
		name     string
		inputs   any
		approver Approver
		extra    []Rule
		want     []want // after the python.exec.stateful decision
		wantErr  string
	}{
		{name: "workdir files", inputs: []any{"a.csv", "sub/b.csv"},
			want: []want{{Allow, filepath.Join(f.work, "a.csv"), "files in the working directory"}, {Allow, filepath.Join(f.work, "sub", "b.csv"), ""}}},
		{name: "absolute workdir file", inputs: filepath.Join(f.work, "a.csv"),
			want: []want{{Allow, filepath.Join(f.work, "a.csv"), ""}}},
		{name: "symlink to an ssh key", inputs: []any{"a.csv", "innocent.csv"},
			want:    []want{{Allow, filepath.Join(f.work, "a.csv"), ""}, {Deny, filepath.Join(f.home, ".ssh", "id_ed25519"), `denied by rule "SSH keys" (builtin)`}},
			wantErr: `permission denied: filesystem.read on ` + filepath.Join(f.home, ".ssh", "id_ed25519") + ` (requested as "innocent.csv"): denied by rule "SSH keys" (builtin)`},
		{name: "link to a link to an ssh key", inputs: "sub/also-innocent.csv",
			want: []want{{Deny, filepath.Join(f.home, ".ssh", "id_ed25519"), "SSH keys"}}, wantErr: "SSH keys"},
		{name: "ssh key even when approver says yes", inputs: filepath.Join(f.home, ".ssh", "id_ed25519"), approver: &approver{ok: true},
			want: []want{{Deny, filepath.Join(f.home, ".ssh", "id_ed25519"), "SSH keys"}}, wantErr: "SSH keys"},
		{name: "aws credentials", inputs: filepath.Join(f.home, ".aws", "credentials"),
			want: []want{{Deny, filepath.Join(f.home, ".aws", "credentials"), "cloud credentials"}}, wantErr: "cloud credentials"},
		{name: "dotdot escape", inputs: "sub/../../home/.aws/credentials",
			want: []want{{Deny, filepath.Join(f.home, ".aws", "credentials"), "cloud credentials"}}, wantErr: "cloud credentials"},
		{name: "dotdot to an unlisted file", inputs: "../outside/report.csv",
			want:    []want{{Deny, filepath.Join(f.outside, "report.csv"), "no rule matched and no approver is configured (fail closed)"}},
			wantErr: "no rule matched and no approver is configured (fail closed)"},
		{name: "symlink out of the workdir asks", inputs: "report.csv",
			want: []want{{Deny, filepath.Join(f.outside, "report.csv"), "no rule matched and no approver is configured"}}, wantErr: "fail closed"},
		{name: "approved", inputs: "report.csv", approver: &approver{ok: true},
			want: []want{{Allow, filepath.Join(f.outside, "report.csv"), "no rule matched; approved by operator"}}},
		{name: "refused", inputs: "report.csv", approver: &approver{ok: false},
			want: []want{{Deny, filepath.Join(f.outside, "report.csv"), "no rule matched; refused by operator"}}, wantErr: "refused by operator"},
		{name: "approver error", inputs: "report.csv", approver: &approver{ok: true, err: errors.New("ui crashed")},
			want: []want{{Deny, filepath.Join(f.outside, "report.csv"), "no rule matched; approval failed: ui crashed (fail closed)"}}, wantErr: "ui crashed"},
		{name: "ask rule beats the workdir allow", inputs: "secrets/token.txt", approver: &approver{ok: false},
			extra: []Rule{{Effect: Ask, Capability: FilesystemRead, Target: "${workdir}/secrets/**", Reason: "secrets", Source: "p.json rule 1"}},
			want:  []want{{Deny, filepath.Join(f.work, "secrets", "token.txt"), `approval required by rule "secrets" (p.json rule 1); refused by operator`}}, wantErr: "refused"},
		{name: "missing file", inputs: "nope.csv", approver: &approver{ok: true},
			want: []want{{Deny, "", "cannot resolve path: no such file or directory"}}, wantErr: `filesystem.read on "nope.csv": cannot resolve path: no such file or directory`},
		{name: "dangling link", inputs: "dangling.csv",
			want: []want{{Deny, "", "cannot resolve path: no such file or directory"}}, wantErr: "dangling.csv"},
		{name: "empty item", inputs: []any{""},
			want: []want{{Deny, "", "empty path"}}, wantErr: "empty path"},
		{name: "no inputs", inputs: nil},
		{name: "wrong type", inputs: 42.0, wantErr: `check permissions: resolve capability filesystem.read: argument "inputs": invalid argument`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &Engine{
				Policy:   Policy{Rules: append(DefaultRules(), tt.extra...)},
				Vars:     f.vars(),
				Approver: tt.approver,
			}
			report, err := e.Check(context.Background(), ExecuteCapabilities(), map[string]any{"code": "x", "inputs": tt.inputs})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Check error = %v, want it to contain %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if tt.want == nil && tt.wantErr != "" {
				if !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrDenied) || len(report.Decisions) != 0 {
					t.Fatalf("argument error %v, report %v: want ErrInvalidArgument and no decisions", err, report)
				}
				return
			}
			if len(report.Decisions) != 1+len(tt.want) {
				t.Fatalf("got %d decisions, want %d: %v", len(report.Decisions), 1+len(tt.want), report.Decisions)
			}
			if d := report.Decisions[0]; d.Effect != Allow || d.Capability.Name != PythonExecStateful {
				t.Errorf("first decision = %s, want python.exec.stateful allowed", d)
			}
			for i, w := range tt.want {
				d := report.Decisions[i+1]
				if d.Effect != w.effect || d.Capability.Target != w.target || !strings.Contains(d.Reason, w.reason) {
					t.Errorf("decision %d = %s (target %q); want %v on %q with reason containing %q", i+1, d, d.Capability.Target, w.effect, w.target, w.reason)
				}
			}
		})
	}
}

func TestEngineDeniedError(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e := &Engine{Policy: DefaultPolicy(), Vars: f.vars()}
	inputs := []any{"a.csv", "innocent.csv", "sub/b.csv", "nope.csv"}
	report, err := e.Check(context.Background(), ExecuteCapabilities(), map[string]any{"inputs": inputs})
	if !errors.Is(err, ErrDenied) {
		t.Fatalf("Check error = %v, want ErrDenied", err)
	}
	var denied *DeniedError
	if !errors.As(err, &denied) {
		t.Fatalf("Check error %T is not a *DeniedError", err)
	}
	if len(denied.Decisions) != 2 || denied.Decisions[0].Capability.Requested != "innocent.csv" || denied.Decisions[1].Capability.Requested != "nope.csv" {
		t.Fatalf("denied = %v, want innocent.csv and nope.csv", denied.Decisions)
	}
	key := filepath.Join(f.home, ".ssh", "id_ed25519")
	want := `permission denied: filesystem.read on ` + key + ` (requested as "innocent.csv"): denied by rule "SSH keys" (builtin); ` +
		`filesystem.read on "nope.csv": cannot resolve path: no such file or directory`
	if err.Error() != want {
		t.Errorf("Error() =\n  %s\nwant\n  %s", err, want)
	}
	allowed := report.Allowed(FilesystemRead)
	wantAllowed := []ResolvedCapability{
		{Name: FilesystemRead, Requested: "a.csv", Target: filepath.Join(f.work, "a.csv")},
		{Name: FilesystemRead, Requested: "sub/b.csv", Target: filepath.Join(f.work, "sub", "b.csv")},
	}
	if len(allowed) != len(wantAllowed) || allowed[0] != wantAllowed[0] || allowed[1] != wantAllowed[1] {
		t.Errorf("Allowed = %+v, want %+v", allowed, wantAllowed)
	}
	if got := report.Denied(); len(got) != 2 {
		t.Errorf("Denied = %v, want 2 decisions", got)
	}
	if got := report.Allowed(PythonExecStateful); len(got) != 1 {
		t.Errorf("Allowed(exec) = %v, want 1", got)
	}
}

func TestEngineShowsApproverTheAskDecision(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := &approver{ok: true}
	e := &Engine{Policy: DefaultPolicy(), Vars: f.vars(), Approver: a}
	if _, err := e.Check(context.Background(), ExecuteCapabilities(), map[string]any{"inputs": []string{"a.csv", "report.csv"}}); err != nil {
		t.Fatal(err)
	}
	if len(a.asked) != 1 {
		t.Fatalf("approver asked %d times, want once: %v", len(a.asked), a.asked)
	}
	d := a.asked[0]
	if d.Effect != Ask || d.Reason != "no rule matched" || d.Capability.Target != filepath.Join(f.outside, "report.csv") || d.Capability.Requested != "report.csv" {
		t.Errorf("approver saw %s", d)
	}
}

// TestEngineSymlinkedSecretDir covers a credentials directory that is itself a
// symlink: the deny pattern is resolved through it, while a plain Evaluate, which
// does not read the file system, cannot know.
func TestEngineSymlinkedSecretDir(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	work, home, vault := filepath.Join(root, "work"), filepath.Join(root, "home"), filepath.Join(root, "vault")
	writeFile(t, filepath.Join(vault, "aws-token"))
	writeFile(t, filepath.Join(work, "a.csv"))
	symlink(t, vault, filepath.Join(home, ".aws"))
	vars := Vars{Workdir: work, Home: home}
	policy := Policy{Rules: append(DefaultRules(), Rule{Effect: Allow, Capability: "*", Target: vault + "/**", Reason: "vault", Source: "test"})}

	e := &Engine{Policy: policy, Vars: vars}
	report, err := e.Check(context.Background(), ExecuteCapabilities(), map[string]any{"inputs": filepath.Join(home, ".aws", "aws-token")})
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "cloud credentials") {
		t.Fatalf("Check error = %v, want a cloud credentials denial", err)
	}
	if got := report.Decisions[1].Capability.Target; got != filepath.Join(vault, "aws-token") {
		t.Errorf("target = %q, want the vault file", got)
	}

	d := policy.Evaluate(ResolvedCapability{Name: FilesystemRead, Target: filepath.Join(vault, "aws-token")}, vars)
	if d.Effect != Allow {
		t.Errorf("pure Evaluate = %s; want allow, as it does not resolve patterns", d)
	}
}

// TestEngineAllowPatternNotResolved checks that an allow pattern naming a symlink
// does not follow it: whoever controls the link must not control the allow.
func TestEngineAllowPatternNotResolved(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	writeFile(t, filepath.Join(root, "elsewhere", "f.txt"))
	writeFile(t, filepath.Join(root, "work", "x"))
	symlink(t, filepath.Join(root, "elsewhere"), filepath.Join(root, "work", "session", "outputs"))
	e := &Engine{
		Policy: Policy{Rules: []Rule{{Effect: Allow, Capability: "*", Target: "${workdir}/session/outputs/**", Reason: "outputs"}}},
		Vars:   Vars{Workdir: filepath.Join(root, "work"), Home: "/nonexistent"},
	}
	_, err := e.Check(context.Background(), []Capability{{Name: FilesystemRead, TargetArg: "p"}}, map[string]any{"p": "session/outputs/f.txt"})
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "no rule matched") {
		t.Fatalf("Check error = %v, want no rule matched", err)
	}
}

// TestEngineSymlinkedWorkdir checks that ${workdir} is resolved, so the default allow
// works when the working directory is reached through a link.
func TestEngineSymlinkedWorkdir(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	writeFile(t, filepath.Join(root, "real", "a.csv"))
	symlink(t, filepath.Join(root, "real"), filepath.Join(root, "link"))
	e := &Engine{Policy: DefaultPolicy(), Vars: Vars{Workdir: filepath.Join(root, "link"), Home: filepath.Join(root, "home")}}
	report, err := e.Check(context.Background(), ExecuteCapabilities(), map[string]any{"inputs": "a.csv"})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if got := report.Allowed(FilesystemRead); len(got) != 1 || got[0].Target != filepath.Join(root, "real", "a.csv") {
		t.Fatalf("Allowed = %v", got)
	}
}

func TestEngineZeroValue(t *testing.T) {
	t.Parallel()
	var e Engine
	report, err := e.Check(context.Background(), ExecuteCapabilities(), nil)
	if !errors.Is(err, ErrDenied) || len(report.Decisions) != 1 {
		t.Fatalf("zero Engine: %v, %v; want python.exec.stateful denied", report, err)
	}
	if want := "no rule matched and no approver is configured (fail closed)"; report.Decisions[0].Reason != want {
		t.Errorf("reason = %q, want %q", report.Decisions[0].Reason, want)
	}
	// Relative paths need a working directory.
	e.Policy = DefaultPolicy()
	_, err = e.Check(context.Background(), ExecuteCapabilities(), map[string]any{"inputs": "a.csv"})
	if err == nil || !strings.Contains(err.Error(), "no workdir") {
		t.Fatalf("Check without workdir = %v, want a relative path denial", err)
	}
}

// TestEngineDefaultHome sets HOME, so it cannot run in parallel.
func TestEngineDefaultHome(t *testing.T) {
	f := newFixture(t)
	t.Setenv("HOME", f.home)
	e := &Engine{Policy: DefaultPolicy(), Vars: Vars{Workdir: f.work}}
	_, err := e.Check(context.Background(), ExecuteCapabilities(), map[string]any{"inputs": "innocent.csv"})
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), `denied by rule "SSH keys" (builtin)`) {
		t.Fatalf("Check = %v, want the SSH key denied via the default home", err)
	}
}

func TestEngineLogs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var buf bytes.Buffer
	e := &Engine{Policy: DefaultPolicy(), Vars: f.vars(), Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	_, _ = e.Check(context.Background(), ExecuteCapabilities(), map[string]any{"inputs": []string{"a.csv", "innocent.csv"}})
	var records []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		records = append(records, r)
	}
	if len(records) != 3 {
		t.Fatalf("got %d log records, want 3:\n%s", len(records), buf.String())
	}
	want := map[string]any{
		"level":      "WARN",
		"msg":        "permission decision",
		"capability": "filesystem.read",
		"target":     filepath.Join(f.home, ".ssh", "id_ed25519"),
		"requested":  "innocent.csv",
		"effect":     "deny",
		"rule":       "SSH keys",
		"source":     "builtin",
		"reason":     `denied by rule "SSH keys" (builtin)`,
	}
	for k, v := range want {
		if records[2][k] != v {
			t.Errorf("record[%q] = %v, want %v", k, records[2][k], v)
		}
	}
	if records[0]["level"] != "DEBUG" || records[0]["effect"] != "allow" || records[1]["requested"] != "a.csv" {
		t.Errorf("allow records = %v", records[:2])
	}
}

func TestEngineConcurrent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e := &Engine{Policy: DefaultPolicy(), Vars: f.vars(), Approver: &approver{ok: true}}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			_, err := e.Check(context.Background(), ExecuteCapabilities(), map[string]any{"inputs": []any{"a.csv", "report.csv"}})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
