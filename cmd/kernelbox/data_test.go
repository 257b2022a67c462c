package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// credentialData makes a data directory holding .env and nested/id_rsa, which
// the built-in policy denies as inputs, beside ordinary data.
func credentialData(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "d")
	for name, body := range map[string]string{".env": "API_KEY=s3cret", "nested/id_rsa": "PRIVATE KEY", "table.csv": "a,b\n1,2\n"} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return dir
}

// TestServeDataCredentials is issue 33 item 5 as an operator meets it: `serve
// --data d=DIR` (and a template's data) whose DIR holds .env and nested/id_rsa
// refuses to start, on the local backend (which copies data into sessions)
// and on docker (which bind-mounts it), naming each file and its rule; before,
// the kernel read both in full. A policy that allows those exact paths lets
// the server start, and then the kernel reads them through data/d on both.
func TestServeDataCredentials(t *testing.T) {
	py := testenv.Jupyter(t)
	bin := kernelboxBin(t)
	backends := map[string][]string{
		"local":  {"--backend", "local", "--python", py},
		"docker": {"--backend", "docker"},
	}
	for name, backend := range backends {
		t.Run(name, func(t *testing.T) {
			if name == "docker" {
				testenv.Docker(t)
			}
			dir := credentialData(t)
			policy := filepath.Join(t.TempDir(), "policy.json")
			writePolicy(t, policy, dir+"/**")
			for how, extra := range map[string][]string{
				"--data":        {"--data", "d=" + dir},
				"template data": {"--templates", templatesWithData(t, dir)},
			} {
				t.Run(how, func(t *testing.T) {
					ws, work := testDirs(t)
					args := append(append([]string{"serve", "--listen", "127.0.0.1:0", "--workspace", ws, "--workdir", work, "--policy", policy}, backend...), extra...)
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					cmd := exec.CommandContext(ctx, bin, args...)
					out, err := cmd.CombinedOutput()
					var ee *exec.ExitError
					require.ErrorAs(t, err, &ee, "serve started:\n%s", out)
					t.Logf("%s", out)
					for _, w := range []string{
						`data mount "d": ` + dir + ` holds 2 entries that the permission policy denies as inputs`,
						filepath.Join(dir, ".env") + `: denied by rule "environment files" (builtin)`,
						filepath.Join(dir, "nested", "id_rsa") + `: denied by rule "SSH keys" (builtin)`,
					} {
						require.Contains(t, string(out), w)
					}
					require.NotContains(t, string(out), "table.csv")
					if how == "template data" {
						require.Contains(t, string(out), `template "withdata": `)
					}
					require.Empty(t, testenv.Containers(t, cmd.Process.Pid), "no container was made")
				})
			}

			// Allowed path by path, the same directory is served, in full.
			writePolicy(t, policy, dir+"/**", filepath.Join(dir, ".env"), filepath.Join(dir, "nested", "id_rsa"))
			s := startServeWith(t, serveOpts{token: "tok", backend: backend, args: []string{"--policy", policy, "--data", "d=" + dir}})
			c, err := client.New(s.URL, &client.Options{Token: "tok"})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r, err := c.Execute(ctx, api.Request{SessionID: "reads", Code: `print(open("data/d/.env").read(), open("data/d/nested/id_rsa").read())`})
			require.NoError(t, err)
			require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
			require.Contains(t, r.Stdout, "API_KEY=s3cret PRIVATE KEY")
		})
	}
}

// writePolicy writes a policy file that allows reading each of targets, on
// top of the built-in rules.
func writePolicy(t testing.TB, file string, targets ...string) {
	t.Helper()
	type rule struct {
		Effect     string `json:"effect"`
		Capability string `json:"capability"`
		Target     string `json:"target"`
		Reason     string `json:"reason"`
	}
	var rules []rule
	for _, tg := range targets {
		rules = append(rules, rule{"allow", "filesystem.read", tg, "test data"})
	}
	b, err := json.Marshal(map[string]any{"rules": rules})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, b, 0o600))
}

// templatesWithData writes a templates file whose template "withdata" mounts
// dir at data/d, and returns its path.
func templatesWithData(t testing.TB, dir string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "templates.json")
	b, err := json.Marshal(map[string]any{"templates": []any{map[string]any{"name": "withdata", "data": map[string]string{"d": dir}}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, b, 0o600))
	return file
}
