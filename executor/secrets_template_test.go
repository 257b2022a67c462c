package executor_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/workspace"
)

// A template with secrets is refused on every backend whose proxy cannot add
// them, with the reason: local (the kernel could read kernelbox's memory),
// remote and any other backend without an egress proxy.
func TestTemplateSecretsRefusedWhereNotApplied(t *testing.T) {
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(t.TempDir(), "ws")})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	rules, err := egress.Compile(egress.Policy{Allow: []string{"api.example"}})
	require.NoError(t, err)
	t.Setenv("KB_TEST_TEMPLATE_KEY", "v")
	sec, err := egress.CompileSecrets([]egress.SecretRule{{Name: "k", Hosts: []string{"api.example"}, FromEnv: "KB_TEST_TEMPLATE_KEY"}}, rules)
	require.NoError(t, err)
	tmpl := executor.Template{Name: "sec", Network: rules.WithSecrets(sec)}
	localWhy := "a local kernel runs as your user and could read kernelbox's memory and environment, where the secret is"
	for name, why := range map[string]string{
		"local":  localWhy, // the backend's own reason (backends/local's WhyNot)
		"remote": "it has no egress proxy, and a secret must never be handed to the kernel itself",
		"fake":   "it has no egress proxy",
	} {
		b := explainedBackend{Backend: newFakeBackend(t), name: name}
		if name == "local" {
			b.why = map[string]string{"secrets": localWhy}
		}
		_, err := executor.New(executor.Options{Backend: b, Workspace: ws, Templates: []executor.Template{tmpl}})
		require.ErrorContains(t, err, `template "sec": field secrets: the `+name+` backend cannot apply it: `+why)
	}
}
