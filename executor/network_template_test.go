package executor_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/workspace"
)

// namedBackend is the fake backend under another backend's name, to read the
// reason New gives that backend.
type namedBackend struct {
	executor.Backend
	name string
}

func (b namedBackend) Name() string { return b.name }

// A network allowlist is refused on every backend that cannot enforce it, with
// the reason: local cannot confine a kernel, remote has no say over a gateway.
func TestTemplateNetworkRefusedWhereNotEnforced(t *testing.T) {
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(t.TempDir(), "ws")})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	rules, err := egress.Compile(egress.Policy{Allow: []string{"files.example"}})
	require.NoError(t, err)
	tmpl := executor.Template{Name: "net", Network: rules}
	for name, why := range map[string]string{
		"local":  "a local kernel is not confined",
		"remote": "kernelbox has no say over a gateway's network",
		"fake":   "it does not carry its kernels' egress",
	} {
		_, err := executor.New(executor.Options{Backend: namedBackend{newFakeBackend(t), name}, Workspace: ws, Templates: []executor.Template{tmpl}})
		require.ErrorContains(t, err, `template "net": field network: the `+name+` backend cannot apply it: `+why)
	}
	// With no allowlist the template is fine, and GET /v1/templates says "none".
	e, err := executor.New(executor.Options{Backend: newFakeBackend(t), Workspace: ws, Templates: []executor.Template{{Name: "offline"}}})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	for _, ti := range e.TemplateInfos() {
		require.NotNil(t, ti.Network, ti.Name)
		require.Equal(t, "none", ti.Network.Mode, ti.Name)
	}
}
