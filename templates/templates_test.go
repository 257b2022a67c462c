package templates_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/templates"
)

var caps = templates.Caps{Memory: 2 << 30, CPUs: 2, Pids: 512, MaxLifetime: 24 * time.Hour, IdleTimeout: 30 * time.Minute}

func TestParse(t *testing.T) {
	t.Parallel()
	ts, err := templates.Parse(strings.NewReader(`{"templates": [
	  {"name": "analyst", "description": "pandas", "memory": "1g", "cpus": 1.5, "pids": 256,
	   "env": {"OMP_NUM_THREADS": "1"}, "preload": ["import os", "x = 1"], "warm": 2,
	   "idle_timeout": "10m", "max_lifetime": "2h", "data": {"ref": "refdata"}, "preload_timeout": "90s",
	   "checkpoint": "after_call", "kernel_names": ["conda-env-analysis-py"]},
	  {"name": "r", "kernel": "ir", "preload": "y <- 1"}
	]}`), "/base", caps)
	require.NoError(t, err)
	require.Len(t, ts, 2)
	a := ts[0]
	require.Equal(t, "analyst", a.Name)
	require.Equal(t, int64(1<<30), a.Memory)
	require.Equal(t, 1.5, a.CPUs)
	require.Equal(t, int64(256), a.Pids)
	require.Equal(t, "import os\nx = 1", a.Preload)
	require.Equal(t, 2, a.Warm)
	require.Equal(t, 10*time.Minute, a.IdleTimeout)
	require.Equal(t, 2*time.Hour, a.MaxLifetime)
	require.Equal(t, "/base/refdata", a.Data[0].HostDir)
	require.Equal(t, 90*time.Second, a.PreloadTimeout)
	require.Zero(t, ts[1].PreloadTimeout, "left out: the server's")
	require.Equal(t, executor.CheckpointAfterCall, a.Checkpoint)
	require.Empty(t, ts[1].Checkpoint, "left out: the server's")
	require.Equal(t, []string{"conda-env-analysis-py"}, a.KernelNames)
	require.Equal(t, "ir", ts[1].Kernel)
	require.Equal(t, "y <- 1", ts[1].Preload)
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc string
		want      []string // all in the error
	}{
		{"memory over the cap", `{"templates": [{"name": "big", "memory": "4g"}]}`, []string{`"big"`, "memory", "4.0 GiB", "2.0 GiB"}},
		{"cpus over the cap", `{"templates": [{"name": "big", "cpus": 3}]}`, []string{`"big"`, "cpus", "3", "cap of 2"}},
		{"pids over the cap", `{"templates": [{"name": "big", "pids": 4096}]}`, []string{`"big"`, "pids", "4096", "512"}},
		{"lifetime over the cap", `{"templates": [{"name": "long", "max_lifetime": "48h"}]}`, []string{`"long"`, "max_lifetime", "48h0m0s", "24h0m0s"}},
		{"idle over the cap", `{"templates": [{"name": "lazy", "idle_timeout": "2h"}]}`, []string{`"lazy"`, "idle_timeout", "2h0m0s", "30m0s"}},
		{"unknown field", `{"templates": [{"name": "t", "memroy": "1g"}]}`, []string{`"t"`, `unknown field "memroy"`}},
		{"unknown top field", `{"templates": [], "extra": 1}`, []string{`unknown field "extra"`}},
		{"empty name", `{"templates": [{"memory": "1g"}]}`, []string{"name: empty"}},
		{"bad name", `{"templates": [{"name": "a/b"}]}`, []string{`"a/b"`, "name"}},
		{"duplicate", `{"templates": [{"name": "a"}, {"name": "a"}]}`, []string{`"a"`, "used twice"}},
		{"kernel name claimed twice", `{"templates": [{"name": "a", "kernel_names": ["py"]}, {"name": "b", "kernel_names": ["py"]}]}`, []string{`"b"`, `"py" is listed by template "a" too`}},
		{"kernel name is a template", `{"templates": [{"name": "a", "kernel_names": ["b"]}, {"name": "b"}]}`, []string{`"b" is a template's name`}},
		{"kernel name with a slash", `{"templates": [{"name": "a", "kernel_names": ["../x"]}]}`, []string{"kernel_names", "only ASCII letters"}},
		{"empty kernel name", `{"templates": [{"name": "a", "kernel_names": [""]}]}`, []string{"kernel_names: an empty name"}},
		{"too many kernel names", `{"templates": [{"name": "a", "kernel_names": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]}]}`, []string{"kernel_names: 17 names"}},
		{"reserved env", `{"templates": [{"name": "a", "env": {"HOME": "/"}}]}`, []string{`"a"`, `env "HOME"`, "kernelbox sets"}},
		{"reserved env prefix", `{"templates": [{"name": "a", "env": {"JUPYTER_PATH": "/"}}]}`, []string{`env "JUPYTER_PATH"`}},
		{"bad memory", `{"templates": [{"name": "a", "memory": "lots"}]}`, []string{`memory "lots"`}},
		{"bad runtime", `{"templates": [{"name": "a", "runtime": "runsc --debug"}]}`, []string{`runtime "runsc --debug"`, "not a runtime name"}},
		{"bad duration", `{"templates": [{"name": "a", "idle_timeout": "soon"}]}`, []string{`idle_timeout "soon"`}},
		{"bad checkpoint", `{"templates": [{"name": "a", "checkpoint": "always"}]}`, []string{`"a"`, `checkpoint: "always" is not a setting`}},
		{"preload timeout at the start timeout", `{"templates": [{"name": "slow", "preload_timeout": "2m"}]}`, []string{`"slow"`, "preload_timeout", "2m0s", "shorter than the server's start timeout of 2m0s"}},
		{"preload timeout too short", `{"templates": [{"name": "a", "preload_timeout": "10ms"}]}`, []string{"preload_timeout: 10ms; want at least 1s"}},
		{"preload timeout negative", `{"templates": [{"name": "a", "preload_timeout": "-5s"}]}`, []string{`preload_timeout "-5s"`}},
		{"preload timeout not a duration", `{"templates": [{"name": "a", "preload_timeout": 30}]}`, []string{`"a"`, "preload_timeout"}},
		{"negative warm", `{"templates": [{"name": "a", "warm": -1}]}`, []string{"warm: -1"}},
		{"no list", `{}`, []string{`no "templates"`}},
		{"trailing data", `{"templates": []} {}`, []string{"after the document"}},
		{"preload not lines", `{"templates": [{"name": "a", "preload": 3}]}`, []string{`"a"`, "preload"}},
		{"not json", `templates: []`, []string{"json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := templates.Parse(strings.NewReader(tt.doc), "/", caps)
			require.Error(t, err)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestParseHugeFile(t *testing.T) {
	t.Parallel()
	doc := `{"templates": [{"name": "a", "description": "` + strings.Repeat("x", templates.MaxFileBytes) + `"}]}`
	_, err := templates.Parse(strings.NewReader(doc), "/", caps)
	require.ErrorContains(t, err, "over 1048576 bytes")
}

func TestLoadNamesFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "t.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"templates": [{"name": "x", "memory": "3g"}]}`), 0o600))
	_, err := templates.Load(p, caps)
	require.ErrorContains(t, err, p)
	require.ErrorContains(t, err, `template "x": memory: asks 3.0 GiB, over the server's cap of 2.0 GiB`)
}

// preload_timeout is held to the server's start timeout when the caps name one.
func TestParsePreloadTimeoutCap(t *testing.T) {
	t.Parallel()
	short := caps
	short.StartTimeout = 30 * time.Second
	_, err := templates.Parse(strings.NewReader(`{"templates": [{"name": "p", "preload_timeout": "45s"}]}`), "/", short)
	require.ErrorContains(t, err, `template "p": preload_timeout: asks 45s; it must be shorter than the server's start timeout of 30s`)
	ts, err := templates.Parse(strings.NewReader(`{"templates": [{"name": "p", "preload_timeout": "29s"}]}`), "/", short)
	require.NoError(t, err)
	require.Equal(t, 29*time.Second, ts[0].PreloadTimeout)
}

func TestParseNetwork(t *testing.T) {
	t.Parallel()
	ts, err := templates.Parse(strings.NewReader(`{"templates": [
	  {"name": "fetch", "network": {"allow": ["files.example", "*.data.example:443"], "cidrs": ["10.20.0.0/16"], "max_bytes": 1000, "max_conns": 4}},
	  {"name": "offline", "network": "none"},
	  {"name": "plain"}
	]}`), "/base", caps)
	require.NoError(t, err)
	require.NotNil(t, ts[0].Network)
	p := ts[0].Network.Policy()
	require.Equal(t, []string{"files.example", "*.data.example:443"}, p.Allow)
	require.Equal(t, int64(1000), p.MaxBytes)
	require.Equal(t, 4, p.MaxConns)
	require.Nil(t, ts[1].Network)
	require.Nil(t, ts[2].Network)
	for _, tt := range []struct{ network, want string }{
		{`"all"`, `network "all": want "none" or an object`},
		{`{"allow": []}`, "an empty allow list"},
		{`{"allow": ["*.com"]}`, `allow "*.com"`},
		{`{"allow": ["2130706433"]}`, `allow "2130706433"`},
		{`{"allow": ["files.example"], "cidrs": ["everything"]}`, `cidrs "everything"`},
		{`{"allow": ["files.example"], "deny": ["x"]}`, `unknown field "deny"`},
		{`{"allow": ["files.example"], "max_bytes": -1}`, "must not be negative"},
	} {
		_, err := templates.Parse(strings.NewReader(`{"templates": [{"name": "n", "network": `+tt.network+`}]}`), "/base", caps)
		require.ErrorContains(t, err, tt.want, tt.network)
	}
}

// A template's secrets are checked at load: a missing variable, a host outside
// the allowlist, a CA variable the template sets itself, a placeholder that
// clashes with env; the error names the template and rule, never a value.
func TestParseSecrets(t *testing.T) {
	t.Setenv("KB_TEST_PARSE_KEY", "parse-secret-value")
	base := `{"templates": [{"name": "v", %s "network": {"allow": ["api.example"]}, "secrets": [%s]}]}`
	rule := `{"name": "k", "hosts": ["api.example"], "from_env": "KB_TEST_PARSE_KEY", "env": "API_KEY"}`
	for _, tc := range []struct{ env, rules, want string }{
		{``, `{"name": "k", "hosts": ["api.example"], "from_env": "KB_TEST_NOT_SET_X"}`, `template "v": secrets "k": from_env: KB_TEST_NOT_SET_X is not set in kernelbox's environment`},
		{``, `{"name": "k", "hosts": ["other.example"], "from_env": "KB_TEST_PARSE_KEY"}`, `not in the template's network allowlist`},
		{``, `{"name": "k", "hosts": ["api.example"], "from_env": "KB_TEST_PARSE_KEY", "value_typo": "x"}`, `unknown field "value_typo"`},
		{`"env": {"SSL_CERT_FILE": "/x"},`, rule, `env "SSL_CERT_FILE": a template with secrets has it set by kernelbox`},
		{`"env": {"API_KEY": "x"},`, rule, `secrets "k": env "API_KEY" is also in the template's env`},
	} {
		_, err := templates.Parse(strings.NewReader(fmt.Sprintf(base, tc.env, tc.rules)), t.TempDir(), templates.Caps{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.rules, err, tc.want)
		}
	}
	_, err := templates.Parse(strings.NewReader(`{"templates": [{"name": "v", "secrets": [`+rule+`]}]}`), t.TempDir(), templates.Caps{})
	if err == nil || !strings.Contains(err.Error(), "no network allowlist") {
		t.Errorf("secrets without network: %v", err)
	}
	ts, err := templates.Parse(strings.NewReader(fmt.Sprintf(base, "", rule)), t.TempDir(), templates.Caps{})
	if err != nil {
		t.Fatal(err)
	}
	s := ts[0].Network.Secrets()
	if got := s.PlaceholderEnv(); len(got) != 1 || got[0] != "API_KEY=kernelbox-secret:k" {
		t.Fatalf("placeholders: %q", got)
	}
	if b, _ := json.Marshal(ts[0]); strings.Contains(string(b), "parse-secret-value") || strings.Contains(fmt.Sprintf("%+v %#v", ts[0], s), "parse-secret-value") {
		t.Fatal("the value shows in the template's JSON or its printed form")
	}
}
