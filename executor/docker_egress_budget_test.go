package executor_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
	"github.com/kernelbox/kernelbox/internal/testkit/testnet"
)

// TestDockerEgressBudgetOverLife is issue 47 item 4: a session's max_bytes is
// spent over its life. The kernel fetches 2 MiB of a 3 MiB allowance, then
// SIGKILLs its own Jupyter server; the next call runs in a new container, and
// its fetch of another MiB is cut at the session's limit (before, the new
// container's proxy gave the session another 3 MiB). After a hibernation and a
// resume (another container again) the session is still refused. About 30 s
// on a loaded machine, most of it three containers starting.
func TestDockerEgressBudgetOverLife(t *testing.T) {
	testnet.Require(t)
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mib.bin"), make([]byte, 1<<20), 0o644))
	web := testnet.New(t, "budget", dir)
	port := strconv.Itoa(web.Port)
	ts := loadTemplates(t, `{"templates": [{"name": "budget",
	  "network": {"allow": ["files.test:`+port+`"], "cidrs": ["`+web.Prefix.String()+`"], "max_bytes": 3145728}}]}`, dockerCaps)
	e := newDockerEnv(t, testexec.Real{EgressTestHosts: map[string][]netip.Addr{"files.test": {web.Addr}}}, func(o *executor.Options) {
		o.Templates = ts
		o.StartTimeout = 3 * time.Minute
	})
	ctx := context.Background()
	exec := func(code string) *api.Result {
		t.Helper()
		r, err := e.Execute(ctx, api.Request{SessionID: "spender", Template: "budget", Code: code})
		require.NoError(t, err)
		return r
	}
	fetch := `import socket, urllib.request
def fetch():
    try:
        return str(len(urllib.request.urlopen("http://files.test:` + port + `/mib.bin", timeout=30).read()))
    except Exception as e:
        return type(e).__name__
`
	r := exec(fetch + "print(socket.gethostname(), fetch(), fetch())")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	first := strings.Fields(r.Stdout)
	require.Equal(t, []string{"1048576", "1048576"}, first[1:], "%q", r.Stdout)

	exec("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)") // the kernel's own Jupyter server
	r = exec(fetch + "print(socket.gethostname(), fetch())")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	second := strings.Fields(r.Stdout)
	require.Len(t, second, 2, "%q", r.Stdout)
	require.NotEqual(t, first[0], second[0], "the call after the kill runs in a new container")
	t.Logf("after the kernel killed its server: a new container fetched %s; notes %q", second[1], r.Notes)
	require.NotEqual(t, "1048576", second[1], "the new container's proxy gave the session a fresh max_bytes")
	require.True(t, hasNote(r.Notes, "network: deny files.test:"+port+" (byte limit)"), "%q", r.Notes)

	_, err := e.Hibernate(ctx, "spender")
	require.NoError(t, err)
	r = exec("print(socket.gethostname(), fetch())")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	third := strings.Fields(r.Stdout)
	require.Len(t, third, 2, "%q", r.Stdout)
	require.NotEqual(t, second[0], third[0], "the resumed session runs in a new container")
	require.Equal(t, "HTTPError", third[1], "%q", r.Stdout)
	require.True(t, hasNote(r.Notes, "network: deny files.test:"+port+" (byte limit)"), "%q", r.Notes)
}
