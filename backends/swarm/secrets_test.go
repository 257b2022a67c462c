package swarm_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/testkit/testnet"
)

// authHost is the test internet's authenticated TLS host (testnet.AuthServer):
// api.test, answering 200 only with "Authorization: Bearer <lab.secret>".
const authHost = "10.203.0.11"

// labSecrets makes the lab's test CA (serve verifies intercepted hosts with
// it) and the vendor template's secret, a file serve reads at start and on
// SIGHUP; it runs before serve starts.
func labSecrets() error {
	var err error
	if lab.ca, err = testnet.NewCAIn(filepath.Join(lab.srv, "ca")); err != nil {
		return err
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	lab.secret = "swarm-lab-" + hex.EncodeToString(b)
	return os.WriteFile(filepath.Join(lab.srv, "vendor.key"), []byte(lab.secret+"\n"), 0o600)
}

// startAuthHost runs the authenticated host on the test internet that
// egressInternet made: a container of the kernel image running
// testnet.AuthServer with a certificate for api.test, serving data.csv.
func startAuthHost(t *testing.T) {
	t.Helper()
	id := labID(t)
	netName, host := "kbtest-internet-"+id, "kbtest-auth-"+id
	t.Cleanup(func() { _, _ = node(1, "rm", "-f", host) })
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data.csv"), []byte("city,n\nOslo,3\nLima,4\n"), 0o644))
	vals := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(vals, "value"), []byte("Bearer "+lab.secret), 0o644))
	cert, key := lab.ca.Issue(t, "api.test")
	out, err := node(1, "run", "-d", "--name", host, "--network", netName, "--ip", authHost,
		"-v", dir+":/srv:ro", "-v", filepath.Dir(cert)+":/certs:ro", "-v", vals+":/vals:ro", kernelImage,
		"python3", "-c", testnet.AuthServer, authHost, "8443", "/srv", "/certs/"+filepath.Base(cert), "/certs/"+filepath.Base(key),
		"Authorization", "/vals/value")
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		_, err := node(1, "exec", host, "python3", "-c", `import socket; socket.create_connection(("`+authHost+`", 8443), 1)`)
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the authenticated host listens")
}

// secretsProbe is what a kernel of the vendor template runs: urllib and pandas
// through the interception (the bundle from SSL_CERT_FILE, no CA of its own),
// the placeholder sent, a credential of its own, a path outside the rule's,
// the reflecting /echo (outside the rule's paths), and what the task has.
const secretsProbe = `import json, os, urllib.request, urllib.error
def get(url, **h):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=h), timeout=60) as f:
            return [f.status, f.read().decode()]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode()]
    except OSError as e:
        return [0, str(e)]
import pandas as pd
bundle = os.environ.get("SSL_CERT_FILE", "")
print(json.dumps({
  "plain": get("https://api.test:8443/data.csv"),
  "pandas": int(pd.read_csv("https://api.test:8443/data.csv").n.sum()),
  "placeholder": get("https://api.test:8443/data.csv", Authorization="Bearer " + os.environ.get("VENDOR_KEY", "")),
  "own": get("https://api.test:8443/data.csv", Authorization="Bearer guessed"),
  "outside": get("https://api.test:8443/other.csv"),
  "echo": get("https://api.test:8443/echo"),
  "env": {k: os.environ.get(k, "") for k in ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "NODE_EXTRA_CA_CERTS", "VENDOR_KEY"]},
  "bundle_writable": os.access(bundle, os.W_OK),
  "bundle_has_ca": "BEGIN CERTIFICATE" in open(bundle).read() if bundle else False,
}))`

type secretsSeen struct {
	Plain          []any             `json:"plain"`
	Pandas         int               `json:"pandas"`
	Placeholder    []any             `json:"placeholder"`
	Own            []any             `json:"own"`
	Outside        []any             `json:"outside"`
	Echo           []any             `json:"echo"`
	Env            map[string]string `json:"env"`
	BundleWritable bool              `json:"bundle_writable"`
	BundleHasCA    bool              `json:"bundle_has_ca"`
}

// kernelSearch is what the kernel runs to look for the value (NEEDLE) in its
// environment, /proc and every file it can read.
const kernelSearch = `import os
hits = [k for k, v in os.environ.items() if NEEDLE in v]
for p in ["/proc/self/environ", "/proc/1/environ", "/proc/self/cmdline", "/proc/1/cmdline"]:
    try:
        if NEEDLE.encode() in open(p, "rb").read():
            hits.append(p)
    except OSError:
        pass
for root in ["/workspace", "/tmp", "/run/kernelbox", "/run/secrets", "/etc", "/proc/self/cwd"]:
    for d, _, fs in os.walk(root):
        for f in fs:
            try:
                with open(os.path.join(d, f), "rb") as fh:
                    if NEEDLE.encode() in fh.read(1 << 24):
                        hits.append(os.path.join(d, f))
            except OSError:
                pass
print("hits", hits)`

// TestSecrets: a swarm session of a template with a secret gets 200 from the
// authenticated host through its proxy's interception, which adds the value
// only on the rule's host and paths (401 elsewhere, a credential of the
// kernel's own refused, the placeholder replaced); the task has the CA bundle
// read-only and the variables; rotation (SIGHUP) takes effect on the next
// request. The value is found nowhere the kernel or an operator looks: the
// kernel's environment, /proc and files, the service's spec, the task
// container's inspect, the swarm's configs, the service's and serve's logs, the
// Results.
func TestSecrets(t *testing.T) {
	requireLab(t)
	egressInternet(t)
	startAuthHost(t)
	const session = "secrets-a"
	defer closeSession(t, session)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var results []*api.Result
	exec := func(code string) *api.Result {
		t.Helper()
		res, err := lab.kb.Execute(ctx, api.Request{SessionID: session, Template: "vendor", Code: code})
		require.NoError(t, err)
		require.Equal(t, "ok", string(res.Status), "%+v\n%s", res.Error, res.Stdout)
		results = append(results, res)
		return res
	}

	res := exec(secretsProbe)
	t.Logf("seen from inside the kernel: %s\nnotes: %q", res.Stdout, res.Notes)
	var seen secretsSeen
	require.NoError(t, jsonUnmarshal(res.Stdout, &seen))
	assert.Equal(t, []any{200.0, "city,n\nOslo,3\nLima,4\n"}, seen.Plain, "the rule's host and path: 200 with the secret added")
	assert.Equal(t, 7, seen.Pandas, "pandas.read_csv through the interception")
	assert.Equal(t, 200.0, seen.Placeholder[0], "the placeholder is replaced")
	assert.Equal(t, 403.0, seen.Own[0])
	assert.Contains(t, seen.Own[1], "refused by rule [secret vendor]: the request carries its own Authorization")
	assert.Equal(t, 401.0, seen.Outside[0], "a path outside the rule's gets no secret: %v", seen.Outside)
	assert.Equal(t, 200.0, seen.Echo[0], "%v", seen.Echo)
	assert.NotContains(t, strings.ToLower(seen.Echo[1].(string)), "authorization", "the reflecting path is outside the rule's paths")
	for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "NODE_EXTRA_CA_CERTS"} {
		assert.Equal(t, "/run/kernelbox/ca-bundle.pem", seen.Env[k], k)
	}
	assert.Equal(t, "kernelbox-secret:vendor", seen.Env["VENDOR_KEY"])
	assert.False(t, seen.BundleWritable, "the bundle is read-only")
	assert.True(t, seen.BundleHasCA)
	notes := strings.Join(res.Notes, "\n")
	assert.Contains(t, notes, "network: allow api.test:8443 via "+authHost+":8443")
	assert.Contains(t, notes, "secret vendor: GET /data.csv 200")
	assert.NotContains(t, notes, "200, 0 B up, 0 B down", "each use counts its bytes")

	secretsAbuse(t, exec)
	secretsRotate(t, exec)

	needle := lab.secret[len(lab.secret)-12:]
	res = exec("NEEDLE = " + `"` + needle + `"` + "\n" + kernelSearch)
	assert.Equal(t, "hits []\n", res.Stdout, "the kernel finds the value nowhere it can read")
	secretsOutside(t, session, needle, results)
}

// secretsAbuse: a second request on one intercepted connection naming another
// host is refused and never sent; a slow host and 64 MiB come through the
// interception.
func secretsAbuse(t *testing.T, exec func(string) *api.Result) {
	t.Helper()
	r := exec(`import http.client, os, time, urllib.parse, urllib.request
p = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
c = http.client.HTTPSConnection(p.hostname, p.port, timeout=30)
c.set_tunnel("api.test", 8443)
c.request("GET", "/data.csv")
r1 = c.getresponse(); r1.read()
c.putrequest("GET", "/data.csv", skip_host=True)
c.putheader("Host", "secure.test:8443")
c.endheaders()
r2 = c.getresponse()
print(r1.status, r2.status, r2.read().decode().strip())
print(urllib.request.urlopen("https://api.test:8443/slow?s=3", timeout=60).read().decode().strip())
t0 = time.monotonic()
n = 0
with urllib.request.urlopen("https://api.test:8443/zeros?n=67108864", timeout=120) as f:
    while True:
        b = f.read(1 << 20)
        if not b:
            break
        n += len(b)
print(n, round(n / (time.monotonic() - t0) / 2**20), "MiB/s")`)
	assert.Contains(t, r.Stdout, "200 403 kernelbox egress proxy: refused by rule [host mismatch]")
	assert.Contains(t, r.Stdout, "\nlate\n", "a slow host")
	assert.Contains(t, r.Stdout, "\n67108864 ")
	t.Logf("a swarm kernel's urllib through the interception: %s", r.Stdout)
}

// secretsRotate: serve re-reads the value on SIGHUP; the next request carries
// the new one, which the host refuses (401); with the old one back, 200.
func secretsRotate(t *testing.T, exec func(string) *api.Result) {
	t.Helper()
	key := filepath.Join(lab.srv, "vendor.key")
	fetch := `import urllib.request, urllib.error
try:
    print(urllib.request.urlopen("https://api.test:8443/data.csv", timeout=60).status)
except urllib.error.HTTPError as e:
    print(e.code)`
	hup := func(v string) {
		require.NoError(t, os.WriteFile(key, []byte(v+"\n"), 0o600))
		out, err := node(1, "kill", "--signal", "HUP", serveName)
		require.NoError(t, err, out)
	}
	await := func(want, why string) {
		t.Helper()
		got := ""
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			if got = exec(fetch).Stdout; got == want {
				return
			}
		}
		t.Errorf("%s: got %q", why, got)
	}
	hup("swarm-lab-rotated-value")
	await("401\n", "after SIGHUP the next request carries the new value, which the host refuses")
	hup(lab.secret)
	await("200\n", "the old value back")
}

// secretsOutside searches what an operator sees for the value: the service's
// spec (docker service inspect), the task container's inspect on its node, every
// config of kernelbox on the swarm, the service's logs, serve's log at debug
// level and the Results.
func secretsOutside(t *testing.T, session, needle string, results []*api.Result) {
	t.Helper()
	task := sessionTask(t, session)
	where := map[string]string{}
	var err error
	where["docker service inspect"], err = node(1, "service", "inspect", task.ServiceID)
	require.NoError(t, err)
	assert.Contains(t, where["docker service inspect"], "VENDOR_KEY=kernelbox-secret:vendor")
	assert.Contains(t, where["docker service inspect"], "/run/kernelbox/ca-bundle.pem")
	i := nodeIndex(t, labNode(t, task.NodeID))
	where["the task container's docker inspect"], err = node(i, "inspect", task.Status.ContainerStatus.ContainerID)
	require.NoError(t, err)
	cfgs, err := lab.manager.ConfigList(context.Background(), client.ConfigListOptions{Filters: make(client.Filters).Add("label", "io.kernelbox.created-by=kernelbox")})
	require.NoError(t, err)
	var bundle bool
	for _, c := range cfgs.Items {
		where["config "+c.Spec.Name] = string(c.Spec.Data)
		bundle = bundle || strings.Contains(c.Spec.Name, "-cabundle-")
	}
	assert.True(t, bundle, "the CA bundle is a config of kernelbox's")
	where["docker service logs"], _ = node(1, "service", "logs", "--raw", task.ServiceID)
	logs, err := node(1, "logs", serveName)
	require.NoError(t, err)
	where["serve's log at debug"] = logs
	assert.Contains(t, logs, "egress secret used")
	all, err := json.Marshal(results)
	require.NoError(t, err)
	where["the Results"] = string(all)
	for what, s := range where {
		assert.NotContains(t, s, needle, "the secret is in %s", what)
		assert.NotContains(t, s, "swarm-lab-rotated-value", "the rotated secret is in %s", what)
	}
}
