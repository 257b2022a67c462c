package executor_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/workspace"
)

// explainedBackend is the fake backend under another name, with reasons of its
// own for the fields it does not apply (executor.SpecExplainer).
type explainedBackend struct {
	executor.Backend
	name string
	why  map[string]string
}

func (b explainedBackend) Name() string { return b.name }

func (b explainedBackend) WhyNot(field string) string { return b.why[field] }

// A network allowlist is refused on every backend that cannot enforce it, with
// the reason the backend gives (executor.SpecExplainer; local's and remote's are
// tested in their packages), else the executor's; a field the backend gives no
// reason for is refused without one.
func TestTemplateNetworkRefusedWhereNotEnforced(t *testing.T) {
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(t.TempDir(), "ws")})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	rules, err := egress.Compile(egress.Policy{Allow: []string{"files.example"}})
	require.NoError(t, err)
	tmpl := executor.Template{Name: "net", Network: rules}
	explained := explainedBackend{Backend: newFakeBackend(t), name: "confined-not", why: map[string]string{"network": "its kernels are not confined"}}
	_, err = executor.New(executor.Options{Backend: explained, Workspace: ws, Templates: []executor.Template{tmpl}})
	require.EqualError(t, err, `template "net": field network: the confined-not backend cannot apply it: its kernels are not confined`)
	_, err = executor.New(executor.Options{Backend: newFakeBackend(t), Workspace: ws, Templates: []executor.Template{tmpl}})
	require.EqualError(t, err, `template "net": field network: the fake backend cannot apply it: it does not carry its kernels' egress through kernelbox's proxy`)
	_, err = executor.New(executor.Options{Backend: explained, Workspace: ws, Templates: []executor.Template{{Name: "big", Memory: 1 << 30}}})
	require.EqualError(t, err, `template "big": field memory: the confined-not backend cannot apply it`)
	// With no allowlist the template is fine, and GET /v1/templates says "none".
	e, err := executor.New(executor.Options{Backend: newFakeBackend(t), Workspace: ws, Templates: []executor.Template{{Name: "offline"}}})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	for _, ti := range e.TemplateInfos() {
		require.NotNil(t, ti.Network, ti.Name)
		require.Equal(t, "none", ti.Network.Mode, ti.Name)
	}
}
