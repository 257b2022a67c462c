package swarm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/internal/keep"
	"github.com/kernelbox/kernelbox/egress"
)

// goodKept is a service record of the shape the backend writes.
func goodKept() keptService {
	return keptService{
		Session: "s1", Service: "k3x2y9q0w8e7r6t5y4u3i2o1p", Name: "kernelbox-0a1b2c3d",
		Network: "n3x2y9q0w8e7r6t5y4u3i2o1p", Secret: "s3x2y9q0w8e7r6t5y4u3i2o1p", Task: "t3x2y9q0w8e7r6t5y4u3i2o1p",
		Node: "m3x2y9q0w8e7r6t5y4u3i2o1p", Addr: "10.0.1.3:8888", Token: strings.Repeat("ab", 32), Kernel: "python3",
	}
}

// TestReadKept: the state file is read back for its own owner only; a corrupt
// file, another format or owner, or a bad instance adopts nothing; a record of
// the wrong shape is dropped with the reason, the others kept.
func TestReadKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "swarm.json")
	st, skipped, err := readKept(path, "o")
	require.NoError(t, err, "a missing file is no state")
	assert.Nil(t, st)
	assert.Empty(t, skipped)

	write := func(v any) {
		t.Helper()
		b, err := json.Marshal(v)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, b, 0o600))
	}
	bad := func(k keptService, f func(*keptService)) keptService { f(&k); return k }
	good := goodKept()
	withProxy := bad(good, func(k *keptService) {
		k.Session, k.Proxy, k.Egress = "s2", "10.0.1.2:3128", &egress.Policy{Allow: []string{"files.example"}}
	})
	write(keptState{Version: keptVersion, Owner: "o", Instance: "6f1c8a6e-1d0c-4e36-9c55-1d5b7d1f2a10",
		Configs: []keptConfig{{ID: "c3x2y9q0w8e7r6t5y4u3i2o1p", Name: "kernelbox-6f1c8a6e-launcher-01020304"}},
		Services: []keptService{
			good,
			withProxy,
			bad(withProxy, func(k *keptService) { k.Egress = nil }),
			bad(good, func(k *keptService) { k.Egress = withProxy.Egress }),
			bad(withProxy, func(k *keptService) { k.Proxy = "10.0.1.2:8888" }),
			bad(withProxy, func(k *keptService) { k.Egress = &egress.Policy{Allow: []string{"*"}} }),
			bad(good, func(k *keptService) { k.Session = "../x" }),
			bad(good, func(k *keptService) { k.Name = "other" }),
			bad(good, func(k *keptService) { k.Token = "short" }),
			bad(good, func(k *keptService) { k.Addr = "10.0.1.3:22" }),
			bad(good, func(k *keptService) { k.Service = "ID WITH SPACES" }),
			bad(good, func(k *keptService) { k.Kernel = "../../bin/sh" }),
		}})
	st, skipped, err = readKept(path, "o")
	require.NoError(t, err)
	require.Len(t, st.Services, 2)
	assert.Equal(t, good, st.Services[0])
	assert.Equal(t, withProxy, st.Services[1], "with its egress proxy's address and allowlist")
	assert.Len(t, skipped, 10, "%q", skipped)
	ids := st.ids()
	for _, id := range []string{good.Service, good.Network, good.Secret, "c3x2y9q0w8e7r6t5y4u3i2o1p"} {
		assert.True(t, ids[id], id)
	}

	_, _, err = readKept(path, "another")
	assert.ErrorContains(t, err, `written for owner "o"`)
	write(keptState{Version: 2, Owner: "o", Instance: "6f1c8a6e-1d0c-4e36-9c55-1d5b7d1f2a10"})
	_, _, err = readKept(path, "o")
	assert.ErrorContains(t, err, "has format 2")
	write(keptState{Version: keptVersion, Owner: "o", Instance: "not-a-uuid"})
	_, _, err = readKept(path, "o")
	assert.ErrorContains(t, err, "not a uuid")
	require.NoError(t, os.WriteFile(path, []byte(`{"version": 1, "services": [`), 0o600))
	_, _, err = readKept(path, "o")
	assert.ErrorContains(t, err, "is corrupt")
}

// TestLockState: a second holder of the state file is refused while the first
// runs, and takes it once the first lets go.
func TestLockState(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "swarm.json")
	f, err := keep.Lock(path)
	require.NoError(t, err)
	_, err = keep.Lock(path)
	require.ErrorIs(t, err, ErrStateInUse)
	require.NoError(t, f.Close())
	f, err = keep.Lock(path)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	f, err = keep.Lock("")
	require.NoError(t, err)
	assert.Nil(t, f)
}
