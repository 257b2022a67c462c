package permissions

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

func TestParsePolicy(t *testing.T) {
	t.Parallel()
	nDefaults := len(DefaultRules())
	tests := []struct {
		name      string
		json      string
		wantRules int
		wantUser  []Rule
	}{
		{name: "defaults implied", json: `{"rules": [{"effect": "allow", "capability": "filesystem.read", "target": "/data/**", "reason": "shared datasets"}]}`,
			wantRules: nDefaults + 1,
			wantUser:  []Rule{{Effect: Allow, Capability: "filesystem.read", Target: "/data/**", Reason: "shared datasets", Source: "p.json rule 1"}}},
		{name: "defaults true", json: `{"defaults": true, "rules": []}`, wantRules: nDefaults},
		{name: "defaults false", json: `{"defaults": false, "rules": [{"effect":"deny","capability":"*"},{"effect":"ask","capability":"filesystem.*","target":"${workdir}/secrets/**"}]}`,
			wantRules: 2,
			wantUser: []Rule{
				{Effect: Deny, Capability: "*", Source: "p.json rule 1"},
				{Effect: Ask, Capability: "filesystem.*", Target: "${workdir}/secrets/**", Source: "p.json rule 2"},
			}},
		{name: "empty object", json: ` {} `, wantRules: nDefaults},
		{name: "no rules with defaults off", json: `{"defaults": false}`, wantRules: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := ParsePolicy(strings.NewReader(tt.json), "p.json")
			if err != nil {
				t.Fatalf("ParsePolicy: %v", err)
			}
			if len(p.Rules) != tt.wantRules {
				t.Fatalf("got %d rules, want %d", len(p.Rules), tt.wantRules)
			}
			user := p.Rules[len(p.Rules)-len(tt.wantUser):]
			for i, want := range tt.wantUser {
				if user[i] != want {
					t.Errorf("rule %d = %+v, want %+v", i, user[i], want)
				}
			}
		})
	}
}

func TestParsePolicyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, json, wantErr string
	}{
		{"empty", ``, "want a JSON object"},
		{"null", `null`, "want a JSON object"},
		{"list", `[]`, "want a JSON object"},
		{"syntax", `{"rules": [}`, "p.json: invalid character"},
		{"unknown field", `{"default": true}`, `unknown field "default"`},
		{"defaults type", `{"defaults": "yes"}`, "cannot unmarshal string"},
		{"trailing data", `{} {}`, "trailing data"},
		{"rules not a list", `{"rules": {}}`, "cannot unmarshal object"},
		{"null rule", `{"rules": [null]}`, "p.json rule 1: want a JSON object, got null"},
		{"unknown rule field", `{"rules": [{"effect": "allow", "capability": "*", "path": "/x"}]}`, `p.json rule 1: json: unknown field "path"`},
		{"source is not settable", `{"rules": [{"effect": "allow", "capability": "*", "source": "builtin"}]}`, `p.json rule 1: json: unknown field "source"`},
		{"unknown effect", `{"rules": [{"effect": "allow", "capability": "*"}, {"effect": "permit", "capability": "*"}]}`, `p.json rule 2: unknown effect "permit"`},
		{"effect case", `{"rules": [{"effect": "Deny", "capability": "*"}]}`, `p.json rule 1: unknown effect "Deny"`},
		{"effect number", `{"rules": [{"effect": 1, "capability": "*"}]}`, "p.json rule 1: json: cannot unmarshal number"},
		{"missing effect", `{"rules": [{"capability": "*"}]}`, "p.json rule 1: missing effect"},
		{"empty capability", `{"rules": [{"effect": "allow", "capability": ""}]}`, "p.json rule 1: empty capability pattern"},
		{"missing capability", `{"rules": [{"effect": "allow", "target": "/x"}]}`, "p.json rule 1: empty capability pattern"},
		{"relative target", `{"rules": [{"effect": "allow", "capability": "*", "target": "data/**"}]}`, `p.json rule 1: target "data/**": pattern must be absolute`},
		{"tilde target", `{"rules": [{"effect": "deny", "capability": "*", "target": "~/.ssh/**"}]}`, "must be absolute"},
		{"unknown variable", `{"rules": [{"effect": "allow", "capability": "*", "target": "${HOME}/x"}]}`, "unknown variable ${HOME}"},
		{"dotdot target", `{"rules": [{"effect": "allow", "capability": "*", "target": "${workdir}/../x"}]}`, `".." is not allowed`},
		{"bad double star", `{"rules": [{"effect": "allow", "capability": "*", "target": "/data**"}]}`, "whole path element"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParsePolicy(strings.NewReader(tt.json), "p.json")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParsePolicy error = %v, want it to contain %q", err, tt.wantErr)
			}
			if !strings.HasPrefix(err.Error(), "parse policy: p.json") {
				t.Errorf("error %q does not name the operation and source", err)
			}
		})
	}
}

func TestParsePolicyTooLarge(t *testing.T) {
	t.Parallel()
	big := `{"rules": [` + strings.Repeat(" ", maxPolicySize) + `]}`
	_, err := ParsePolicy(strings.NewReader(big), "big.json")
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("ParsePolicy error = %v, want size error", err)
	}
}

func TestLoadPolicy(t *testing.T) {
	t.Parallel()
	t.Run("example file", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join("..", "examples", "policy.json")
		p, err := LoadPolicy(path)
		if err != nil {
			t.Fatalf("LoadPolicy: %v", err)
		}
		if err := p.Validate(Vars{Workdir: "/w", Home: "/h", Artifacts: "/a"}); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		last := p.Rules[len(p.Rules)-1]
		if want := path + " rule 4"; last.Source != want || last.Effect != Ask {
			t.Errorf("last rule = %v, want an ask rule from %q", last, want)
		}
		vars := Vars{Workdir: "/w", Home: "/h", Artifacts: "/a"}
		for target, want := range map[string]Effect{
			"/srv/datasets/iris.csv":        Allow,
			"/srv/datasets/private/x.csv":   Deny,
			"/srv/datasets/keys/server.pem": Deny,
			"/a/s1/plot.png":                Allow,
			"/w/secrets/token.txt":          Ask,
			"/w/data.csv":                   Allow,
			"/srv/other.csv":                Ask,
		} {
			d := p.Evaluate(ResolvedCapability{Name: FilesystemRead, Requested: target, Target: target}, vars)
			if d.Effect != want {
				t.Errorf("example policy: %s; want %v", d, want)
			}
		}
	})
	t.Run("missing file", func(t *testing.T) {
		t.Parallel()
		_, err := LoadPolicy(filepath.Join(t.TempDir(), "nope.json"))
		if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "load policy: ") {
			t.Fatalf("LoadPolicy error = %v, want a wrapped fs.ErrNotExist", err)
		}
	})
}
