package remote_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/remote"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
)

// keptFile is remote.json as the tests read and edit it.
type keptFile struct {
	Version int              `json:"version"`
	Kernels []map[string]any `json:"kernels"`
}

func readKeptFile(t *testing.T, path string) keptFile {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var f keptFile
	require.NoError(t, json.Unmarshal(data, &f), "%s", data)
	return f
}

func writeKeptFile(t *testing.T, path string, f keptFile) {
	t.Helper()
	data, err := json.Marshal(f)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o600))
}

// reattachFrom builds a backend on s whose state file is path, reattaches and
// returns what it took back, by session.
func reattachFrom(t *testing.T, s remote.Gateway, path string) (*remote.Backend, map[string]executor.Reattached) {
	t.Helper()
	b := newBackend(t, []remote.Gateway{s}, func(o *remote.Options) { o.StateFile = path })
	list, err := b.Reattach(context.Background())
	require.NoError(t, err)
	out := map[string]executor.Reattached{}
	for _, r := range list {
		out[r.Session] = r
	}
	return b, out
}

// An edited state file cannot make the backend take another client's kernel:
// a kernel that does not hold the session's directory (its name has the nonce
// the kernelbox that made it drew), one another client is connected to, one of
// another kernelspec, one the gateway does not have and one on a gateway that
// is not configured are all told Lost with the reason, and left alone; the
// session's own kernel, once nobody holds it, is taken back. Two backends never
// share one state file.
func TestReattachRecognisesItsOwnKernels(t *testing.T) {
	t.Parallel() // its own gateways and sessions, no time bound, nothing counted process-wide
	s, _ := startGateway(t)
	ctx := context.Background()
	jc, err := jupyter.NewClient(s.Endpoint(), nil)
	require.NoError(t, err)
	stateDir := t.TempDir()
	path := filepath.Join(stateDir, "remote.json")
	b1 := newBackend(t, []remote.Gateway{gw(s)}, func(o *remote.Options) { o.StateFile = path })
	e := newEnv(t, b1, func(o *executor.Options) { o.StateDir = stateDir; o.OnClose = executor.StopKeep })
	ok(t, e.run(t, "s1", "x = 1"))
	f := readKeptFile(t, path)
	require.Len(t, f.Kernels, 1)
	own := f.Kernels[0]
	ownID := own["kernel_id"].(string)

	// While this executor holds the kernel, a second backend on a copy of the
	// file does not take it.
	cp := filepath.Join(t.TempDir(), "remote.json")
	writeKeptFile(t, cp, f)
	_, got := reattachFrom(t, gw(s), cp)
	assert.Nil(t, got["s1"].Placement)
	assert.Contains(t, got["s1"].Lost, "open connection")

	// A second backend on the same file is refused while the first runs.
	_, err = remote.New(ctx, remote.Options{Gateways: []remote.Gateway{gw(s)}, StateFile: path})
	require.ErrorIs(t, err, remote.ErrStateInUse)

	require.NoError(t, e.Close()) // keep: the kernel runs on
	foreign, err := jc.StartKernel(ctx, jupyter.StartOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = jc.Shutdown(context.Background(), foreign.ID) })
	other, err := jc.StartKernel(ctx, jupyter.StartOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = jc.Shutdown(context.Background(), other.ID) })

	edited := func(session string, change map[string]any) map[string]any {
		r := map[string]any{}
		for k, v := range own {
			r[k] = v
		}
		r["session"] = session
		for k, v := range change {
			r[k] = v
		}
		return r
	}
	f.Kernels = append(f.Kernels,
		edited("foreign", map[string]any{"kernel_id": foreign.ID}),
		edited("spec", map[string]any{"kernel_id": other.ID, "kernel_name": "other"}),
		edited("gone", map[string]any{"kernel_id": "00000000-0000-4000-8000-000000000000"}),
		edited("elsewhere", map[string]any{"gateway": "http://127.0.0.1:9"}),
	)
	writeKeptFile(t, path, f)
	b3, got := reattachFrom(t, gw(s), path)
	require.NotNil(t, got["s1"].Placement, "%q", got["s1"].Lost)
	assert.Equal(t, ownID, got["s1"].KernelID)
	assert.Contains(t, got["foreign"].Lost, "is not the one kernelbox started")
	assert.Contains(t, got["spec"].Lost, `not the session's "other"`)
	assert.Contains(t, got["gone"].Lost, "no longer has kernel 00000000-0000-4000-8000-000000000000")
	assert.Contains(t, got["elsewhere"].Lost, "gateway http://127.0.0.1:9 is not configured")
	for _, id := range []string{"foreign", "spec", "gone", "elsewhere"} {
		assert.Nil(t, got[id].Placement, id)
	}
	after := readKeptFile(t, path)
	require.Len(t, after.Kernels, 1, "the file lists what was taken back")
	assert.Equal(t, ownID, after.Kernels[0]["kernel_id"])

	// The foreign kernel is untouched: still there, never used. A placement taken
	// back that no session claims shuts its own kernel down when closed.
	require.NoError(t, got["s1"].Placement.Close(ctx))
	ks, err := jc.Kernels(ctx)
	require.NoError(t, err)
	var left []string
	for _, k := range ks {
		left = append(left, k.ID)
	}
	assert.ElementsMatch(t, []string{foreign.ID, other.ID}, left)
	require.NoError(t, b3.Close(ctx))
	assert.Empty(t, readKeptFile(t, path).Kernels, "Close empties the file")
}
