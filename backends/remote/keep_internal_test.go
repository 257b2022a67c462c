package remote

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/internal/keep"
	"github.com/kernelbox/kernelbox/executor"
)

// goodKept is a record of the shape the backend writes.
func goodKept() keptKernel {
	return keptKernel{Session: "s1", Gateway: "http://127.0.0.1:8888/prefix", KernelID: "0b9e8a4c-4a8e-4f3c-9c1e-2d3f4a5b6c7d",
		Kernel: "python3", Dir: "/srv/jupyter/kernelbox-sessions/s1-0123456789abcdef0123456789abcdef", Started: time.Unix(1700000000, 0).UTC()}
}

// writeState writes v as JSON to a state file in a new directory.
func writeState(t *testing.T, v any) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "remote.json")
	data, ok := v.(string)
	if !ok {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		data = string(b)
	}
	require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
	return path
}

// A state file is refused whole when it cannot be trusted as a file (a link, too
// big, corrupt, another format), and record by record when a record does not
// have the shape the backend writes, so that an edited file cannot steer the
// backend to a made-up URL, kernel path or directory.
func TestReadKept(t *testing.T) {
	t.Parallel()
	kept, skipped, err := readKept(filepath.Join(t.TempDir(), "missing.json"))
	require.NoError(t, err, "no file is no state")
	assert.Empty(t, kept)
	assert.Empty(t, skipped)

	for name, tc := range map[string]struct {
		file func(t *testing.T) string
		err  string
	}{
		"corrupt":  {func(t *testing.T) string { return writeState(t, `{"version": 1, "kernels": [`) }, "is corrupt"},
		"version":  {func(t *testing.T) string { return writeState(t, keptState{Version: 2}) }, "has format 2"},
		"not json": {func(t *testing.T) string { return writeState(t, "\x00\x01") }, "is corrupt"},
		"huge": {func(t *testing.T) string {
			return writeState(t, `{"version": 1, "kernels": [], "pad": "`+strings.Repeat("x", keep.MaxBytes)+`"}`)
		}, "not a regular file of at most"},
		"symlink": {func(t *testing.T) string {
			target := writeState(t, keptState{Version: keptVersion, Kernels: []keptKernel{goodKept()}})
			link := filepath.Join(t.TempDir(), "remote.json")
			require.NoError(t, os.Symlink(target, link))
			return link
		}, "too many levels of symbolic links"},
		"directory": {func(t *testing.T) string { return t.TempDir() }, "not a regular file"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kept, _, err := readKept(tc.file(t))
			require.ErrorContains(t, err, tc.err)
			assert.Empty(t, kept)
		})
	}

	bad := func(f func(*keptKernel)) keptKernel {
		k := goodKept()
		k.Session = "other"
		k.Dir = "/srv/kernelbox-sessions/other-0123456789abcdef0123456789abcdef"
		f(&k)
		return k
	}
	recs := []keptKernel{
		goodKept(),
		bad(func(k *keptKernel) { k.Session = "../s" }),
		bad(func(k *keptKernel) { k.Gateway = "http://user:pw@127.0.0.1:8888" }),
		bad(func(k *keptKernel) { k.Gateway = "http://127.0.0.1:8888/?token=abc" }),
		bad(func(k *keptKernel) { k.Gateway = "file:///etc/passwd" }),
		bad(func(k *keptKernel) { k.KernelID = "../../api/contents" }),
		bad(func(k *keptKernel) { k.Kernel = "python3; rm" }),
		bad(func(k *keptKernel) { k.Dir = "kernelbox-sessions/other-0123456789abcdef0123456789abcdef" }),
		bad(func(k *keptKernel) { k.Dir = "/srv/../etc/other-0123456789abcdef0123456789abcdef" }),
		bad(func(k *keptKernel) { k.Dir = "/etc" }),
		bad(func(k *keptKernel) { k.Dir = "/srv/other-0123" }),
		bad(func(k *keptKernel) {}),
	}
	recs[len(recs)-1].Session = "s1" // listed twice
	kept, skipped, err = readKept(writeState(t, keptState{Version: keptVersion, Kernels: recs}))
	require.NoError(t, err)
	assert.Equal(t, []keptKernel{goodKept()}, kept)
	assert.Len(t, skipped, len(recs)-1, "%q", skipped)
	for _, why := range skipped {
		assert.NotContains(t, why, "pw", "no user info in a message")
	}
}

// The state file is written 0600, lists only placements whose kernel a file sync
// reached (never a warm pool's, a closed or a lost one), never holds a token,
// and reads back as written; Close's last write empties it.
func TestWriteKept(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "remote.json")
	g := &gateway{url: "http://127.0.0.1:8888/prefix", placements: map[*Placement]struct{}{}}
	g.ep.Token = "secret-token"
	b := &Backend{opts: Options{StateFile: path}, log: slog.New(slog.DiscardHandler), gateways: []*gateway{g}}
	k := goodKept()
	place := func(session, kernelID, dir string) *Placement {
		p := &Placement{b: b, gw: g, session: session, kernelID: kernelID, dir: dir, started: k.Started,
			server: executor.Server{Endpoint: g.ep, KernelName: "python3"}}
		g.placements[p] = struct{}{}
		return p
	}
	place(k.Session, k.KernelID, k.Dir)
	place(".warm-1", k.KernelID, k.Dir)
	place("fresh", "", "")
	place("closed", k.KernelID, k.Dir).closed = true
	place("lost", k.KernelID, k.Dir).loss.Lose("gateway left")
	b.saveKept()

	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "secret-token")
	kept, skipped, err := readKept(path)
	require.NoError(t, err)
	assert.Empty(t, skipped)
	assert.Equal(t, []keptKernel{k}, kept)

	b.keptFile.Final(func() { b.writeKept(nil) })
	b.saveKept() // after the last write: nothing
	kept, _, err = readKept(path)
	require.NoError(t, err)
	assert.Empty(t, kept)
}
