package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/testkit/testnet"
)

// TestProxyOverheadNetns measures what the proxy adds between the test's network
// namespace and a test host in a namespace of its own: the time of a new
// connection and one small request, direct and as plain HTTP through the proxy;
// the same for a new HTTPS connection, direct and through a CONNECT tunnel; and
// bulk HTTPS throughput direct and through a tunnel (plain HTTP through CONNECT
// is refused: issue 47 item 7). The numbers are logged
// (docs/network.md#measured); the bounds are loose on purpose.
func TestProxyOverheadNetns(t *testing.T) {
	dir := t.TempDir()
	big := make([]byte, 128<<20)
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "small.csv"), []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := testnet.New(t, "web", dir)
	port := strconv.Itoa(h.Port)
	ca := testnet.NewCA(t)
	cert, key := ca.Issue(t, "secure.test")
	sh := testnet.NewTLS(t, "secure", dir, cert, key)
	sport := strconv.Itoa(sh.Port)
	n := newTestNetWith(t, Policy{Allow: []string{"web.test:" + port, "secure.test:" + sport},
		CIDRs: []string{h.Prefix.String(), sh.Prefix.String()}, MaxBytes: 4 << 30},
		map[string][]netip.Addr{"web.test": {h.Addr}, "secure.test": {sh.Addr}})
	target := net.JoinHostPort(h.Addr.String(), port)

	// Interleaved, so that load from other tests on the machine falls on both.
	const rounds = 200
	small := "GET /small.csv HTTP/1.1\r\nHost: web.test\r\nConnection: close\r\n\r\n"
	ways := []func() error{
		func() error { return getOver(target, "", nil, small, 8) },
		func() error {
			return getOver(n.addr, "", nil, "GET http://web.test:"+port+"/small.csv HTTP/1.1\r\nHost: web.test:"+port+"\r\n\r\n", 8)
		},
	}
	p50 := timeInterleaved(t, rounds, ways)
	direct, plain := p50[0], p50[1]
	t.Logf("new connection + small GET, p50 over %d: direct %s, proxy plain HTTP %s (+%s)",
		rounds, direct, plain, plain-direct)
	if plain-direct > 100*time.Millisecond {
		t.Errorf("the proxy adds %s per connection", plain-direct)
	}

	// A new HTTPS connection (TCP, TLS handshake with the test CA, a small GET),
	// direct and through a CONNECT tunnel, which the proxy passes untouched once it
	// has read the ClientHello's server name.
	pem, err := os.ReadFile(filepath.Join(ca.Dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	conf := &tls.Config{RootCAs: roots, ServerName: "secure.test"}
	smallTLS := "GET /small.csv HTTP/1.1\r\nHost: secure.test\r\nConnection: close\r\n\r\n"
	starget := net.JoinHostPort(sh.Addr.String(), sport)
	p50 = timeInterleaved(t, rounds, []func() error{
		func() error { return getOver(starget, "", conf, smallTLS, 8) },
		func() error { return getOver(n.addr, "secure.test:"+sport, conf, smallTLS, 8) },
	})
	t.Logf("new HTTPS connection + small GET, p50 over %d: direct %s, through a CONNECT tunnel %s (+%s)",
		rounds, p50[0], p50[1], p50[1]-p50[0])
	if p50[1]-p50[0] > 100*time.Millisecond {
		t.Errorf("the proxy adds %s per HTTPS connection", p50[1]-p50[0])
	}

	bigReq := "GET /big.bin HTTP/1.1\r\nHost: secure.test\r\nConnection: close\r\n\r\n"
	rate := func(via, connect string) float64 {
		start := time.Now()
		if err := getOver(via, connect, conf, bigReq, len(big)); err != nil {
			t.Fatal(err)
		}
		return float64(len(big)) / time.Since(start).Seconds() / (1 << 20)
	}
	// Paired rounds, direct then through the tunnel, so that a burst of load from
	// elsewhere falls on both of a pair; the median of the pairs' ratios, and the
	// best of each way, are logged.
	const bulkRounds = 9
	var ds, ps, ratios []float64
	for range bulkRounds {
		d, p := rate(starget, ""), rate(n.addr, "secure.test:"+sport)
		ds, ps, ratios = append(ds, d), append(ps, p), append(ratios, p/d)
	}
	slices.Sort(ratios)
	d, p := slices.Max(ds), slices.Max(ps)
	t.Logf("bulk %d MiB over HTTPS, %d paired rounds: through a CONNECT tunnel %.0f%% of direct (median of the pairs; %.0f%% to %.0f%%); best: direct %.0f MiB/s, tunnel %.0f MiB/s",
		len(big)>>20, bulkRounds, 100*ratios[bulkRounds/2], 100*ratios[0], 100*ratios[bulkRounds-1], d, p)
	if p <= 0 {
		t.Fatal("no throughput")
	}
}

// newTestNetWith is a proxy on loopback with a policy and a name map of its own.
func newTestNetWith(tb testing.TB, p Policy, hosts map[string][]netip.Addr) *testNet {
	tb.Helper()
	px, err := New(Options{Rules: mustCompile(tb, p), TestHosts: hosts})
	if err != nil {
		tb.Fatal(err)
	}
	return &testNet{proxy: px, addr: serveLoopback(tb, px)}
}

// getOver dials addr, opens a CONNECT tunnel to connect first unless it is "",
// speaks TLS with conf unless it is nil, sends req and reads a 200 response whose
// body is at least minBody bytes.
func getOver(addr, connect string, conf *tls.Config, req string, minBody int) error {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	br := bufio.NewReader(c)
	if connect != "" {
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", connect, connect)
		resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			return fmt.Errorf("CONNECT: %s", resp.Status)
		}
	}
	var rw io.ReadWriter = c
	if conf != nil {
		tc := tls.Client(c, conf)
		rw, br = tc, bufio.NewReader(tc)
	}
	if _, err := io.WriteString(rw, req); err != nil {
		return err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	n, err := drain(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || n < int64(minBody) {
		return fmt.Errorf("%s, %d bytes", resp.Status, n)
	}
	return nil
}

// drain reads r to its end in 256 KiB reads and returns how many bytes it read.
// io.Copy to io.Discard reads 8 KiB at a time: in a profile of the bulk rounds that
// client spent 55% of the process's CPU (its read calls), on the same 2 cores as the
// proxy it measures.
func drain(r io.Reader) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		k, err := r.Read(buf)
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// timeInterleaved runs each of fs rounds times, in turn, and returns their
// median times.
func timeInterleaved(t testing.TB, rounds int, fs []func() error) []time.Duration {
	t.Helper()
	ds := make([][]time.Duration, len(fs))
	for range rounds {
		for i, f := range fs {
			start := time.Now()
			if err := f(); err != nil {
				t.Fatal(err)
			}
			ds[i] = append(ds[i], time.Since(start))
		}
	}
	out := make([]time.Duration, len(fs))
	for i, d := range ds {
		slices.Sort(d)
		out[i] = d[rounds/2]
	}
	return out
}
