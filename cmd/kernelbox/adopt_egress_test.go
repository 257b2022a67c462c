package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// TestServeDockerEgressAdopt: a docker session with a network allowlist
// survives a SIGKILL of serve. Its proxy listened on the container's loopback
// in its network namespace; the next serve takes the container back, listens
// there again, and the session keeps its variables and its downloads through
// the allowlist, in the same container. (Before, such a session's container
// was removed at the next start: its proxy's socket went with the process.)
// A session whose template has secrets is not taken back (its credentials are
// in no file for the next process to read): its container is replaced and its
// next call is told its state is lost; the secret's value is in no file of the
// workspace.
func TestServeDockerEgressAdopt(t *testing.T) {
	testenv.Docker(t)
	t.Parallel()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "a,b\n1,2\n") }))
	t.Cleanup(web.Close)
	_, port, err := net.SplitHostPort(web.Listener.Addr().String())
	require.NoError(t, err)
	cfg := t.TempDir()
	const secret = "kb-adopt-SECRET-3f9c27"
	keyFile := filepath.Join(cfg, "vendor.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(secret+"\n"), 0o600))
	tmpl := filepath.Join(cfg, "templates.json")
	require.NoError(t, os.WriteFile(tmpl, []byte(`{"templates": [{"name": "net",
	  "network": {"allow": ["web.test:`+port+`"], "cidrs": ["127.0.0.1/32"]}},
	  {"name": "sec", "network": {"allow": ["web.test:`+port+`"], "cidrs": ["127.0.0.1/32"]},
	   "secrets": [{"name": "vendor", "hosts": ["web.test:`+port+`"], "value": "Bearer {secret}",
	                "from_file": "`+keyFile+`"}]}]}`), 0o600))
	ws, data := testDirs(t)
	args := append(adoptArgs(ws, data), "--templates", tmpl, "--egress-test-hosts", "web.test=127.0.0.1")
	fetch := `import urllib.request
print(urllib.request.urlopen("http://web.test:` + port + `/x.csv", timeout=30).read().decode() == "a,b\n1,2\n")`
	ctx := context.Background()

	cmd, url, _ := rawServe(t, args...)
	c := adoptClient(t, url)
	r, err := c.Execute(ctx, api.Request{SessionID: "ega", Template: "net", Code: fetch + "\nx = 41"})
	require.NoError(t, err)
	require.Equal(t, "True\n", r.Stdout, "%+v", r.Error)
	before := containersNamed(t, "ega")
	require.Len(t, before, 1)
	r, err = c.Execute(ctx, api.Request{SessionID: "egs", Template: "sec", Code: "y = 7"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	withSecrets := containersNamed(t, "egs")
	require.Len(t, withSecrets, 1)
	kill9(t, cmd)

	cmd, url, log := rawServe(t, args...)
	c = adoptClient(t, url)
	r = adoptRun(t, c, "ega", fetch+"\nx + 1")
	assert.False(t, r.StateLost, "%v\n%s", r.Notes, log)
	assert.Equal(t, "42", r.Result, "the session keeps its variable: %+v %v", r.Error, r.Notes)
	assert.Equal(t, "True\n", r.Stdout, "its download through the allowlist: %+v", r.Error)
	assert.NotEmpty(t, r.Notes, "the download is in the call's network notes")
	assert.Equal(t, before, containersNamed(t, "ega"), "the same container")

	r = adoptRun(t, c, "egs", "globals().get('y', 'gone')")
	assert.True(t, r.StateLost, "a session with secrets is not taken back, and says so: %v", r.Notes)
	assert.Equal(t, "'gone'", r.Result, "%+v", r.Error)
	now := containersNamed(t, "egs")
	assert.Len(t, now, 1)
	assert.NotEqual(t, withSecrets, now, "its container was replaced")
	require.NoError(t, filepath.WalkDir(ws, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil // a file gone meanwhile, a socket, a mount point
		}
		if fi, err := d.Info(); err != nil || fi.Size() > 1<<20 {
			return nil // the sessions' disk images: written only by kernels that never had the value
		}
		b, err := os.ReadFile(path)
		if err == nil {
			assert.NotContains(t, string(b), secret, "the secret's value is in %s", path)
		}
		return nil
	}))
	require.NoError(t, c.CloseSession(ctx, "egs"))

	require.NoError(t, c.CloseSession(ctx, "ega"))
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())
	assert.Empty(t, containersNamed(t, "ega"), "no container left")
}
