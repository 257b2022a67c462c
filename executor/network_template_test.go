package executor_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/local"
	"github.com/kernelbox/kernelbox/backends/remote"
	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/workspace"
)

// explainedBackend is the fake backend under another backend's name, with that
// backend's own reasons (executor.SpecExplainer), to read the error New gives it.
type explainedBackend struct {
	executor.Backend
	name string
	why  executor.SpecExplainer
}

func (b explainedBackend) Name() string { return b.name }

func (b explainedBackend) WhyNot(field string) string {
	if b.why == nil {
		return ""
	}
	return b.why.WhyNot(field)
}

// A network allowlist is refused on every backend that cannot enforce it, with
// the reason the backend gives (executor.SpecExplainer): local cannot confine a
// kernel, remote has no say over a gateway; a backend that gives none gets the
// executor's.
func TestTemplateNetworkRefusedWhereNotEnforced(t *testing.T) {
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(t.TempDir(), "ws")})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	rules, err := egress.Compile(egress.Policy{Allow: []string{"files.example"}})
	require.NoError(t, err)
	tmpl := executor.Template{Name: "net", Network: rules}
	for _, c := range []struct {
		name string
		why  executor.SpecExplainer
		want string
	}{
		{"local", new(local.Backend), "a local kernel is not confined"},
		{"remote", new(remote.Backend), "kernelbox has no say over a gateway's network"},
		{"fake", nil, "it does not carry its kernels' egress"},
	} {
		b := explainedBackend{Backend: newFakeBackend(t), name: c.name, why: c.why}
		_, err := executor.New(executor.Options{Backend: b, Workspace: ws, Templates: []executor.Template{tmpl}})
		require.ErrorContains(t, err, `template "net": field network: the `+c.name+` backend cannot apply it: `+c.want)
	}
	// A field the backend gives no reason for is refused without one.
	b := explainedBackend{Backend: newFakeBackend(t), name: "local", why: new(local.Backend)}
	_, err = executor.New(executor.Options{Backend: b, Workspace: ws, Templates: []executor.Template{{Name: "big", Memory: 1 << 30}}})
	require.EqualError(t, err, `template "big": field memory: the local backend cannot apply it`)
	// With no allowlist the template is fine, and GET /v1/templates says "none".
	e, err := executor.New(executor.Options{Backend: newFakeBackend(t), Workspace: ws, Templates: []executor.Template{{Name: "offline"}}})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	for _, ti := range e.TemplateInfos() {
		require.NotNil(t, ti.Network, ti.Name)
		require.Equal(t, "none", ti.Network.Mode, ti.Name)
	}
}
