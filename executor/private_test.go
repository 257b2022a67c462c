package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// stateBackend is a fakeBackend that keeps state in a host directory.
type stateBackend struct {
	*fakeBackend
	dir string
}

func (b *stateBackend) StateDirs() []string { return []string{b.dir} }

// With a working directory that holds all of kernelbox's state, the policy allows
// reading it all; still, neither the backend's state directory nor another
// session's artifacts can be staged, and the refusal is a denial.
func TestFakePrivateDirsNotStageable(t *testing.T) {
	t.Parallel()
	b := &stateBackend{fakeBackend: newFakeBackend(t)}
	var top string
	e := newEnvOn(t, b, func(o *executor.Options) {
		top = filepath.Dir(o.Workspace.Root())
		b.dir = filepath.Join(top, "sock")
		o.Permissions = &permissions.Engine{
			Policy: permissions.DefaultPolicy(),
			Vars:   permissions.Vars{Workdir: top, Home: filepath.Join(top, "home"), Artifacts: o.Workspace.ArtifactsDir()},
		}
	})
	token := filepath.Join(b.dir, "token")
	other := filepath.Join(e.WS.ArtifactsDir(), "other", "result.csv")
	public := filepath.Join(top, "public.csv")
	for path, content := range map[string]string{token: "T", other: "R", public: "P"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	}

	for _, src := range []string{token, other} {
		_, err := e.Execute(context.Background(), api.Request{SessionID: "s", Code: "print hi", Inputs: []string{src}})
		require.ErrorIs(t, err, api.ErrDenied, src)
		assert.ErrorIs(t, err, workspace.ErrPrivate, src)
	}
	r, err := e.Execute(context.Background(), api.Request{SessionID: "s", Code: "print hi", Inputs: []string{public}})
	require.NoError(t, err)
	assert.Equal(t, api.StatusOK, r.Status)
}
