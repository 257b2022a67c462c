package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/internal/testkit/testnet"
)

// TestServeDockerSecrets runs `kernelbox serve --backend docker` with a template
// whose secret (from a file) the proxy adds for api.test, a TLS host in a
// network namespace that answers 200 only with it: a call reads the host's CSV
// and its Result notes the use; SIGHUP after the file changes makes the next
// request carry the new value (the host, which wants the old one, answers 401),
// and again after it changes back. The value (old and new) is then looked for,
// and not found, in the Results, a detached call's event log, an artifact the
// kernel wrote from everything it could read, GET /v1/templates, /metrics,
// the workspace's files, docker inspect and serve's log at debug level.
func TestServeDockerSecrets(t *testing.T) {
	testenv.Docker(t)
	testnet.Require(t)
	const secret, rotated = "kb-serve-SECRET-5d8e11", "kb-serve-ROTATED-77aa03"
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data.csv"), []byte("city,n\nOslo,3\n"), 0o644))
	ca := testnet.NewCA(t)
	cert, key := ca.Issue(t, "api.test")
	api := testnet.NewAuth(t, "sapi", dir, cert, key, "Authorization", "Bearer "+secret)
	cfg := t.TempDir()
	keyFile := filepath.Join(cfg, "vendor.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(secret+"\n"), 0o600))
	tf := filepath.Join(cfg, "templates.json")
	require.NoError(t, os.WriteFile(tf, []byte(`{"templates": [{"name": "vendor",
	  "network": {"allow": ["api.test:8443"], "cidrs": ["`+api.Prefix.String()+`"]},
	  "secrets": [{"name": "vendor", "hosts": ["api.test:8443"], "value": "Bearer {secret}",
	               "from_file": "`+keyFile+`", "env": "VENDOR_KEY"}]}]}`), 0o644))
	ws := filepath.Join(t.TempDir(), "ws")
	s := startServeWith(t, serveOpts{token: "tok-secrets", backend: []string{"--backend", "docker"},
		args: []string{"--templates", tf, "--workspace", ws, "--egress-test-hosts", "api.test=" + api.Addr.String(),
			"--egress-upstream-ca", filepath.Join(ca.Dir, "ca.pem")}})
	var seen []string
	execute := func(code string) map[string]any {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"code": code, "template": "vendor"})
		var out map[string]any
		require.Equal(t, http.StatusOK, s.post(t, "/v1/sessions/sec/execute", string(body), &out))
		b, _ := json.Marshal(out)
		seen = append(seen, string(b))
		return out
	}
	fetch := `import os, urllib.request, urllib.error
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=60) as f:
            return f.status, f.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
print(*get("https://api.test:8443/data.csv"))`
	r := execute(fetch)
	require.Equal(t, "200 city,n\nOslo,3\n\n", r["stdout"], "%v", r)
	notes, _ := json.Marshal(r["notes"])
	require.Contains(t, string(notes), "secret vendor: GET /data.csv 200")

	hup := func(value, want string) {
		t.Helper()
		require.NoError(t, os.WriteFile(keyFile, []byte(value+"\n"), 0o600))
		before := strings.Count(s.log.String(), `msg="secrets reloaded"`)
		require.NoError(t, syscall.Kill(s.Pid, syscall.SIGHUP))
		require.Eventually(t, func() bool { return strings.Count(s.log.String(), `msg="secrets reloaded"`) > before }, 10*time.Second, 20*time.Millisecond)
		r := execute(`print(get("https://api.test:8443/data.csv")[0])`)
		require.Equal(t, want+"\n", r["stdout"], "%v", r)
	}
	hup(rotated, "401")
	hup(secret, "200")

	// A detached call whose artifact holds everything the kernel can read of
	// itself: its environment and its process's.
	id := s.detach(t, "sec", `import os
os.makedirs("outputs", exist_ok=True)
with open("outputs/everything.txt", "w") as f:
    f.write(repr(dict(os.environ)))
    f.write(open("/proc/self/environ", "rb").read().decode(errors="replace"))
print(get("https://api.test:8443/data.csv")[0])`)
	require.Eventually(t, func() bool {
		_, b := s.get(t, "/v1/calls/"+id, true)
		return strings.Contains(b, `"state":"done"`) || strings.Contains(b, `"state":"finished"`) || strings.Contains(b, `"result"`)
	}, 2*time.Minute, 100*time.Millisecond)
	_, events := s.get(t, "/v1/calls/"+id+"/events", true)
	require.Contains(t, events, "secret vendor: GET /data.csv 200")
	_, templates := s.get(t, "/v1/templates", true)
	require.Contains(t, templates, `"secrets":[{"name":"vendor","kind":"header","hosts":["api.test:8443"],"header":"Authorization","env":"VENDOR_KEY"}]`)
	_, metrics := s.get(t, "/metrics", true)
	require.Contains(t, metrics, "kernelbox_egress_connections_total")
	searchSecrets(t, s, ws, []string{secret, rotated}, map[string]string{
		"the Results": strings.Join(seen, "\n"), "the call's events": events, "GET /v1/templates": templates, "/metrics": metrics,
	})
	require.Contains(t, s.log.String(), "egress secret used")
}

// searchSecrets looks for values, and fails when it finds one, in seen (what
// the test read from the API), every file of the workspace ws, docker inspect
// of serve's containers and serve's log; the kernel's artifact must be there.
func searchSecrets(t *testing.T, s *server, ws string, values []string, seen map[string]string) {
	t.Helper()
	var inspect []byte
	for _, c := range testenv.Containers(t, s.Pid) {
		out, err := exec.Command("docker", "inspect", c).CombinedOutput()
		require.NoError(t, err, "%s", out)
		inspect = append(inspect, out...)
	}
	require.Contains(t, string(inspect), "VENDOR_KEY=kernelbox-secret:vendor")
	var files []string
	require.NoError(t, filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && fi.Size() < 64<<20 {
			if b, err := os.ReadFile(p); err == nil && slices.ContainsFunc(values, func(v string) bool { return strings.Contains(string(b), v) }) {
				files = append(files, p)
			}
		}
		return nil
	}))
	require.Empty(t, files, "the secret is in the workspace's files")
	artifact := false
	filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
		artifact = artifact || (err == nil && fi.Name() == "everything.txt")
		return nil
	})
	require.True(t, artifact, "the kernel's artifact was collected")
	seen["docker inspect"], seen["serve's log"] = string(inspect), s.log.String()
	for what, text := range seen {
		for _, v := range values {
			require.NotContains(t, text, v, "a secret is in %s", what)
		}
	}
}
