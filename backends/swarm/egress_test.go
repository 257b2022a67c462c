package swarm_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/testkit/testnet"
)

// The lab's test internet for egress: a bridge network on the manager's daemon
// (inside the lab's node namespace, so the subnet cannot meet the machine's own),
// made by TestEgressAllowlist with the subnet egressSubnet, and an HTTPS host on
// it at egressHost. kernelbox serve (startServe) is started with a template that
// allows secure.test on that subnet and with the test-only names secure.test and
// denied.test, both at egressHost: a refusal of denied.test is by name alone.
const (
	egressSubnet    = "10.203.0.0/24"
	egressHost      = "10.203.0.10"
	egressTemplates = `{"templates": [{"name": "egress",
	  "network": {"allow": ["secure.test:8443"], "cidrs": ["` + egressSubnet + `"]}},
	  {"name": "vendor", "network": {"allow": ["api.test:8443"], "cidrs": ["` + egressSubnet + `"]},
	   "secrets": [{"name": "vendor", "hosts": ["api.test:8443"], "paths": ["/data.csv", "/zeros", "/slow"], "header": "Authorization",
	                "value": "Bearer {secret}", "from_file": "/srv/vendor.key", "env": "VENDOR_KEY"}]}]}`
)

// egressInternet makes the test internet on the manager's daemon: its network,
// the serve container attached to it (where the proxies dial from), and the
// HTTPS host, a container of the kernel image running testnet.TLSServer with a
// certificate for secure.test. It returns the test CA's certificate, and removes
// all of it in t's cleanup.
func egressInternet(t *testing.T) string {
	t.Helper()
	id := labID(t)
	netName, host := "kbtest-internet-"+id, "kbtest-https-"+id
	t.Cleanup(func() {
		_, _ = node(1, "rm", "-f", host)
		_, _ = node(1, "network", "disconnect", "-f", netName, serveName)
		_, _ = node(1, "network", "rm", netName)
	})
	out, err := node(1, "network", "create", "--driver", "bridge", "--subnet", egressSubnet, netName)
	require.NoError(t, err, out)
	out, err = node(1, "network", "connect", netName, serveName)
	require.NoError(t, err, out)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data.csv"), []byte("city,n\nOslo,3\nLima,4\n"), 0o644))
	cert, key := lab.ca.Issue(t, "secure.test")
	out, err = node(1, "run", "-d", "--name", host, "--network", netName, "--ip", egressHost,
		"-v", dir+":/srv:ro", "-v", filepath.Dir(cert)+":/certs:ro", kernelImage,
		"python3", "-c", testnet.TLSServer, egressHost, "8443", "/srv", "/certs/"+filepath.Base(cert), "/certs/"+filepath.Base(key))
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		_, err := node(1, "exec", host, "python3", "-c", `import socket; socket.create_connection(("`+egressHost+`", 8443), 1)`)
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the HTTPS host listens")
	pem, err := os.ReadFile(filepath.Join(lab.ca.Dir, "ca.pem"))
	require.NoError(t, err)
	return string(pem)
}

// egressProbe is what a kernel of the egress template runs: a fetch over HTTPS of
// the allowed host (TLS end to end, with the test CA) and of the denied one with
// urllib, which use the proxy variables; the denied one's CONNECT again by hand
// to read the proxy's reason; a connection to another session's proxy (OTHER,
// "" for none); and the kernel's interfaces, routes and resolver.
const egressProbe = `import json, os, socket, ssl, urllib.request, urllib.parse
open('/tmp/ca.pem', 'w').write(CA)
ctx = ssl.create_default_context(cafile='/tmp/ca.pem')
def get(url):
    try:
        return urllib.request.urlopen(url, context=ctx, timeout=20).read().decode()
    except OSError as e:
        return 'error: ' + str(e)
def connect(target):
    proxy = urllib.parse.urlsplit(os.environ['HTTPS_PROXY'])
    try:
        s = socket.create_connection((proxy.hostname, proxy.port), timeout=5)
        s.sendall(('CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n' % (target, target)).encode())
        return s.recv(4096).decode()
    except OSError as e:
        return 'error: ' + str(e)
def other(addr):
    if not addr:
        return ''
    host, port = addr.rsplit(':', 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        return 'connected'
    except OSError as e:
        return type(e).__name__ + ': ' + str(e)
routes = [l.split() for l in open('/proc/net/route').read().splitlines()[1:]]
print(json.dumps({
  'proxy': os.environ.get('HTTPS_PROXY', ''),
  'allowed': get('https://secure.test:8443/data.csv'),
  'denied': get('https://denied.test:8443/data.csv'),
  'denied_raw': connect('denied.test:8443'),
  'other': other(OTHER),
  'ifaces': sorted(os.listdir('/sys/class/net')),
  'default_route': any(r[1] == '00000000' for r in routes),
  'routes': len(routes),
  'resolv': open('/etc/resolv.conf').read(),
}))`

type egressSeen struct {
	Proxy        string   `json:"proxy"`
	Allowed      string   `json:"allowed"`
	Denied       string   `json:"denied"`
	DeniedRaw    string   `json:"denied_raw"`
	Other        string   `json:"other"`
	Ifaces       []string `json:"ifaces"`
	DefaultRoute bool     `json:"default_route"`
	Routes       int      `json:"routes"`
	Resolv       string   `json:"resolv"`
}

// probeEgress runs egressProbe in a new or running session of the egress
// template. It returns the notes of that call and, as a connection that ends
// as its call ends can be noted with the next call, of the trivial calls after
// it until every note in want is there (or ten of them ran).
func probeEgress(t *testing.T, session, caPEM, other string, want ...string) (egressSeen, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code := "CA = " + strconv.Quote(caPEM) + "\nOTHER = " + strconv.Quote(other) + "\n" + egressProbe
	res, err := lab.kb.Execute(ctx, api.Request{SessionID: session, Template: "egress", Code: code})
	require.NoError(t, err)
	require.Equal(t, "ok", string(res.Status), "%+v", res.Error)
	notes := res.Notes
	for range 10 {
		if noted(notes, want) {
			break
		}
		r := run(t, session, "pass")
		notes = append(notes, r.Notes...)
	}
	t.Logf("seen from inside %s's kernel: %s\nnotes: %q", session, res.Stdout, notes)
	var got egressSeen
	require.NoError(t, jsonUnmarshal(res.Stdout, &got))
	return got, notes
}

// noted says whether every prefix in want starts one of notes.
func noted(notes, want []string) bool {
	for _, w := range want {
		if !hasNote(notes, w) {
			return false
		}
	}
	return true
}

// TestEgressAllowlist: a swarm session whose template allows secure.test reaches
// it over HTTPS through kernelbox's proxy, which listens on kernelbox's own
// address on the session's overlay; denied.test gets the proxy's 403 naming the
// rule; the call's network notes show both. The kernel still has only its
// overlay interface, no default route and no resolver. A second session of the
// same template has a listener of its own and cannot reach the first one's.
func TestEgressAllowlist(t *testing.T) {
	requireLab(t)
	t0 := time.Now()
	caPEM := egressInternet(t)
	tNet := time.Since(t0)
	a, b := "egress-a", "egress-b"
	defer closeSession(t, a)
	defer closeSession(t, b)

	allowA, denyA := "network: allow secure.test:8443 via "+egressHost+":8443", "network: deny denied.test:8443 (default deny)"
	seenA, notes := probeEgress(t, a, caPEM, "", allowA, denyA)
	assert.Equal(t, "city,n\nOslo,3\nLima,4\n", seenA.Allowed, "the allowed host over HTTPS")
	assert.Contains(t, seenA.Denied, "403", "urllib fails fast with the proxy's 403")
	assert.True(t, strings.HasPrefix(seenA.DeniedRaw, "HTTP/1.1 403"), "%q", seenA.DeniedRaw)
	assert.Contains(t, seenA.DeniedRaw, "default deny", "the 403 names the rule")
	assert.True(t, noted(notes, []string{allowA, denyA}), "%q", notes)
	assert.Equal(t, []string{"eth0", "lo"}, seenA.Ifaces, "only the session's overlay interface and lo")
	assert.False(t, seenA.DefaultRoute, "no default route")
	assert.Equal(t, 1, seenA.Routes, "one route: the overlay's own subnet")
	assert.NotContains(t, seenA.Resolv, "nameserver", "no resolver")
	require.True(t, strings.HasPrefix(seenA.Proxy, "http://"), "the kernel has the proxy variables: %q", seenA.Proxy)

	// The second session dials the first one's listener: its kernel has no
	// route to the first session's overlay. Its own proxy works.
	aProxy := strings.TrimPrefix(seenA.Proxy, "http://")
	seenB, notes := probeEgress(t, b, caPEM, aProxy, allowA)
	assert.NotEqual(t, seenA.Proxy, seenB.Proxy, "each session has a listener of its own")
	assert.Contains(t, seenB.Other, "unreachable", "session b cannot reach session a's proxy at %s", aProxy)
	assert.Equal(t, "city,n\nOslo,3\nLima,4\n", seenB.Allowed, "through its own proxy")
	assert.True(t, noted(notes, []string{allowA}), "%q", notes)
	t.Logf("egress on the swarm lab: test internet up in %s, the whole test %s", tNet.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
}

// hasNote says whether a note starts with prefix.
func hasNote(notes []string, prefix string) bool {
	for _, n := range notes {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}
