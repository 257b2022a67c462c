package executor_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"log/slog"
	"net/netip"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
	"github.com/kernelbox/kernelbox/internal/testkit/testnet"
)

// dockerSecret is the credential of TestDockerSecrets' rule; it must appear
// nowhere the kernel, a client or a log can see.
const dockerSecret = "kb-dock-SECRET-7e31a0c2"

// A docker session whose template has a secret rule for api.test (a TLS host in
// a network namespace that answers 200 only with the right Authorization):
// urllib, pandas.read_csv and pip (download from the host's authenticated
// package index) get 200 through kernelbox's proxy, which adds the credential;
// the kernel sees only a placeholder. A request carrying its own credential,
// a Host naming another host on the intercepted connection, and a second
// request to another host on the same connection are refused; a redirect to
// another allowed host carries no secret; a slow host and a large download
// come through. Then the value is looked for — and not found — in the
// container's environment (docker inspect), its files, the Results, the
// template listing and the server's log at debug level.
func TestDockerSecrets(t *testing.T) {
	testnet.Require(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data.csv"), []byte("city,n\nOslo,3\nLima,4\n"), 0o644))
	writePackageIndex(t, dir)
	ca := testnet.NewCA(t)
	cert, key := ca.Issue(t, "api.test")
	vendor := testnet.NewAuth(t, "api", dir, cert, key, "Authorization", "Bearer "+dockerSecret)
	plain := testnet.NewAuth(t, "plain", dir, "", "", "Authorization", "Bearer "+dockerSecret)
	pem, err := os.ReadFile(filepath.Join(ca.Dir, "ca.pem"))
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	keyFile := filepath.Join(t.TempDir(), "vendor.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(dockerSecret+"\n"), 0o600))

	ts := loadTemplates(t, `{"templates": [{"name": "vendor",
	  "network": {"allow": ["api.test:8443", "plain.test:8000"], "cidrs": ["`+vendor.Prefix.String()+`", "`+plain.Prefix.String()+`"],
	              "max_bytes": 4294967296},
	  "secrets": [{"name": "vendor", "hosts": ["api.test:8443"], "header": "Authorization",
	               "value": "Bearer {secret}", "from_file": "`+keyFile+`", "env": "VENDOR_KEY"}]}]}`, dockerCaps)
	logw := &syncWriter{w: &bytes.Buffer{}}
	logger := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newDockerEnv(t, testexec.Real{
		EgressTestHosts:     map[string][]netip.Addr{"api.test": {vendor.Addr}, "plain.test": {plain.Addr}},
		EgressUpstreamRoots: roots, Logger: logger,
	}, func(o *executor.Options) {
		o.Templates = ts
		o.StartTimeout = 3 * time.Minute
		o.Logger = logger
	})
	ctx := context.Background()
	var results []*api.Result
	exec := func(code string) *api.Result {
		t.Helper()
		r, err := e.Execute(ctx, api.Request{SessionID: "sec", Template: "vendor", Code: code, Timeout: 5 * time.Minute})
		require.NoError(t, err)
		require.Equal(t, api.StatusOK, r.Status, "%+v\n%s", r.Error, r.Stdout)
		results = append(results, r)
		return r
	}

	secretsFetch(t, exec, vendor)
	secretsRefusals(t, exec)
	secretsKernelSearch(t, exec)
	rotate := func(v string) {
		require.NoError(t, os.WriteFile(keyFile, []byte(v+"\n"), 0o600))
		require.NoError(t, ts[0].Network.Secrets().Reload())
	}
	secretsRotation(t, exec, rotate)

	inspect, err := osexec.Command("docker", "inspect", containerOf(t, "sec", "{{.Id}}")).CombinedOutput()
	require.NoError(t, err, "%s", inspect)
	require.Contains(t, string(inspect), "VENDOR_KEY=kernelbox-secret:vendor")
	infos, err := json.Marshal(e.TemplateInfos())
	require.NoError(t, err)
	require.Contains(t, string(infos), `"secrets":[{"name":"vendor","kind":"header","hosts":["api.test:8443"],"header":"Authorization","env":"VENDOR_KEY"}]`)
	all, err := json.Marshal(results)
	require.NoError(t, err)
	require.NoError(t, e.Close())
	for what, s := range map[string]string{"docker inspect": string(inspect), "the Results": string(all), "GET /v1/templates": string(infos), "the log at debug": logw.String()} {
		require.NotContains(t, s, "7e31a0c2", "the secret is in %s", what)
	}
	require.Contains(t, logw.String(), "egress secret used")
	require.NotContains(t, logw.String()+string(all)+string(inspect), "kb-rotated-value")
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

// secretsFetch: urllib and pandas get 200 through the interception; the kernel
// sees the placeholder and the bundle; the note tells the use; a placeholder
// sent by the kernel is replaced and a credential of its own refused.
func secretsFetch(t *testing.T, exec func(string) *api.Result, vendor *testnet.Host) {
	t.Helper()

	r := exec(`import os, urllib.request, urllib.error, http.client, ssl, time
print(urllib.request.urlopen("https://api.test:8443/data.csv", timeout=30).read().decode(), end="")
print(os.environ["VENDOR_KEY"], os.environ["SSL_CERT_FILE"])`)
	require.Equal(t, "city,n\nOslo,3\nLima,4\nkernelbox-secret:vendor /run/kernelbox/ca-bundle.pem\n", r.Stdout)
	require.True(t, hasNote(r.Notes, "network: allow api.test:8443 via "+vendor.Addr.String()), "%q", r.Notes)
	require.Contains(t, strings.Join(r.Notes, "\n"), "secret vendor: GET /data.csv 200")

	r = exec(`import pandas as pd
int(pd.read_csv("https://api.test:8443/data.csv").n.sum())`)
	require.Equal(t, "7", r.Result)

	// The placeholder an SDK sends is replaced; a credential of the kernel's own
	// is refused with the reason.
	r = exec(`def get(url, **h):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=h), timeout=60) as f:
            return f.status, f.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
print(get("https://api.test:8443/data.csv", Authorization="Bearer " + os.environ["VENDOR_KEY"])[0])
print(*get("https://api.test:8443/data.csv", Authorization="Bearer guessed"))`)
	require.Contains(t, r.Stdout, "200\n403 kernelbox egress proxy: refused by rule [secret vendor]: the request carries its own Authorization")

}

// secretsRefusals: a Host naming another host inside the intercepted TLS and a
// second request to another host on one connection are refused; a redirect to
// another allowed host carries no secret; a slow host and a large download come
// through; pip downloads from the authenticated index.
func secretsRefusals(t *testing.T, exec func(string) *api.Result) {
	t.Helper()
	var r *api.Result
	// A Host naming another host inside the intercepted TLS, and a second
	// request on one connection to another host: refused, never sent.
	r = exec(`c = http.client.HTTPSConnection("127.0.0.1", 3128, timeout=30)
c.set_tunnel("api.test", 8443)
c.request("GET", "/data.csv")
r1 = c.getresponse(); r1.read()
c.putrequest("GET", "/data.csv", skip_host=True)
c.putheader("Host", "plain.test:8000")
c.endheaders()
r2 = c.getresponse()
print(r1.status, r2.status, r2.read().decode().strip())`)
	require.Contains(t, r.Stdout, "200 403 kernelbox egress proxy: refused by rule [host mismatch]")

	// A redirect from the secret's host to another allowed host: the second
	// request carries no secret (plain.test echoes the headers it got).
	r = exec(`print(*get("https://api.test:8443/redirect?to=http://plain.test:8000/echo"))`)
	require.Contains(t, r.Stdout, "200 ")
	require.NotContains(t, strings.ToLower(r.Stdout), "authorization")

	// A slow host, and a large download, through the interception.
	r = exec(`print(*get("https://api.test:8443/slow?s=3"))
t0 = time.monotonic()
n = 0
with urllib.request.urlopen("https://api.test:8443/zeros?n=67108864", timeout=120) as f:
    while True:
        b = f.read(1 << 20)
        if not b:
            break
        n += len(b)
print(n, round(n / (time.monotonic() - t0) / 2**20), "MiB/s")`)
	require.Contains(t, r.Stdout, "200 late\n")
	require.Contains(t, r.Stdout, "\n67108864 ")
	t.Logf("64 MiB through the interception, read by urllib in the kernel: %s", strings.TrimSpace(r.Stdout[strings.Index(r.Stdout, "67108864"):]))

	// pip: download from the host's package index, which wants the credential.
	r = exec(`import subprocess, sys
p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--index-url", "https://api.test:8443/simple/", "-d", "/tmp/dl", "kbdemo"], capture_output=True, text=True, timeout=240)
print(p.returncode, os.listdir("/tmp/dl") if p.returncode == 0 else p.stdout[-2000:] + p.stderr[-2000:])`)
	require.Contains(t, r.Stdout, "0 ['kbdemo-0.1-py3-none-any.whl']")

}

// secretsKernelSearch: the kernel looks for the value in its environment,
// /proc and every file it can read, and finds nothing.
func secretsKernelSearch(t *testing.T, exec func(string) *api.Result) {
	t.Helper()
	// The kernel looking for the value: its environment, /proc, every
	// readable file of its own (the workspace, /tmp, the state directory).
	r := exec(`import glob
needle = "7e31a0c2"
hits = [k for k, v in os.environ.items() if needle in v]
for p in ["/proc/self/environ", "/proc/1/environ", "/proc/self/cmdline"]:
    try:
        if needle.encode() in open(p, "rb").read():
            hits.append(p)
    except OSError:
        pass
for root in ["/workspace", "/tmp", "/run/kernelbox", "/proc/self/cwd"]:
    for d, _, fs in os.walk(root):
        for f in fs:
            try:
                with open(os.path.join(d, f), "rb") as fh:
                    if needle.encode() in fh.read(1 << 24):
                        hits.append(os.path.join(d, f))
            except OSError:
                pass
print("hits", hits)`)
	require.Equal(t, "hits []\n", r.Stdout)

}

// secretsRotation: after a reload (what serve does on SIGHUP) the next request
// carries the new value, which the host refuses; with the old one back it
// answers again.
func secretsRotation(t *testing.T, exec func(string) *api.Result, rotate func(string)) {
	t.Helper()
	// Rotation (what serve does on SIGHUP): the next request carries the new
	// value, which this host refuses; the old one back, it answers again.
	rotate("kb-rotated-value")
	r := exec(`print(get("https://api.test:8443/data.csv")[0])`)
	require.Equal(t, "401\n", r.Stdout)
	rotate(dockerSecret)
	r = exec(`print(get("https://api.test:8443/data.csv")[0])`)
	require.Equal(t, "200\n", r.Stdout)

}
