package egress

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/kernelbox/kernelbox/internal/testkit/testnet"
)

// TestInterceptNetns measures what adding a secret costs, on a test internet: a
// client in the test's namespace, testnet's authenticated TLS host (Python,
// 200 only with the right Authorization) in a namespace of its own, the proxy
// in between. Per-request latency of a small HTTPS GET on a new connection
// (p50 of interleaved rounds): direct (the client holds the key), through a
// plain CONNECT tunnel (the client holds the key) and through the
// interception (the proxy adds it); bulk download through the interception
// against direct, in paired rounds; and an upload and a download through the
// interception. With KERNELBOX_BENCH=1 (the README's row, run with -race=false)
// it does 200 rounds, 256 MiB per bulk round and 1 GiB each way; otherwise 20
// rounds, 16 MiB and 32 MiB.
func TestInterceptNetns(t *testing.T) {
	rounds, bulk, huge := 20, 16<<20, int64(32<<20)
	if os.Getenv("KERNELBOX_BENCH") == "1" {
		rounds, bulk, huge = 200, 256<<20, 1<<30
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "small.csv"), []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tca := testnet.NewCA(t)
	cert, key := tca.Issue(t, "api.test", "tun.test")
	h := testnet.NewAuth(t, "sec", dir, cert, key, "Authorization", "Bearer "+testSecret)
	pem, err := os.ReadFile(filepath.Join(tca.Dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	t.Setenv("KB_TEST_NETNS_KEY", testSecret)
	port := strconv.Itoa(h.Port)
	allow := mustCompile(t, Policy{Allow: []string{"api.test:" + port, "tun.test:" + port}, CIDRs: []string{h.Prefix.String()}, MaxBytes: 8 << 30})
	sec, err := CompileSecrets([]SecretRule{{Name: "k", Hosts: []string{"api.test:" + port}, Value: "Bearer {secret}", FromEnv: "KB_TEST_NETNS_KEY"}}, allow)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	px, err := New(Options{Rules: allow.WithSecrets(sec), Intercept: &Intercept{CA: ca, UpstreamRoots: roots},
		TestHosts: map[string][]netip.Addr{"api.test": {h.Addr}, "tun.test": {h.Addr}}})
	if err != nil {
		t.Fatal(err)
	}
	proxy := serveLoopback(t, px)
	kroots := roots.Clone()
	kroots.AppendCertsFromPEM(ca.CertPEM())
	direct := net.JoinHostPort(h.Addr.String(), port)
	conf := func(name string) *tls.Config { return &tls.Config{RootCAs: kroots, ServerName: name} }
	keyed := "GET /small.csv HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer " + testSecret + "\r\nConnection: close\r\n\r\n"
	bare := "GET /small.csv HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n"

	p50 := timeInterleaved(t, rounds, []func() error{
		func() error { return getOver(direct, "", conf("api.test"), fmt.Sprintf(keyed, "api.test"), 8) },
		func() error {
			return getOver(proxy, "tun.test:"+port, conf("tun.test"), fmt.Sprintf(keyed, "tun.test"), 8)
		},
		func() error { return getOver(proxy, "api.test:"+port, conf("api.test"), bare, 8) },
	})
	t.Logf("new HTTPS connection + small GET, p50 of %d: direct %s, CONNECT tunnel %s (+%s), interception adding the secret %s (+%s)",
		rounds, p50[0], p50[1], p50[1]-p50[0], p50[2], p50[2]-p50[0])
	if p50[2]-p50[0] > 100*time.Millisecond {
		t.Errorf("the interception adds %s per request", p50[2]-p50[0])
	}

	measureKeptAlive(t, rounds, direct, proxy, port, conf, keyed, bare)
	rate := measureBulk(t, bulk, direct, proxy, port, conf, hostCPU(t, h.Name))
	start := time.Now()
	rate(proxy, "api.test:"+port, false, huge)
	down := time.Since(start)
	start = time.Now()
	if got := uploadThrough(t, proxy, "api.test:"+port, conf("api.test"), huge); got != huge {
		t.Fatalf("upload: the host counted %d bytes of %d", got, huge)
	}
	t.Logf("%d MiB through the interception: download %s (%.0f MiB/s), upload %s (%.0f MiB/s)", huge>>20,
		down.Round(time.Millisecond), float64(huge)/down.Seconds()/(1<<20), time.Since(start).Round(time.Millisecond), float64(huge)/time.Since(start).Seconds()/(1<<20))
}

// uploadThrough POSTs n zero bytes to /sink through a CONNECT to connect and
// returns the count the host answers.
func uploadThrough(t *testing.T, proxy, connect string, conf *tls.Config, n int64) int64 {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Minute))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", connect, connect)
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(&bufConn{Conn: c, r: br}, conf)
	fmt.Fprintf(tc, "POST /sink HTTP/1.1\r\nHost: api.test\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", n)
	buf := make([]byte, 256<<10)
	for left := n; left > 0; {
		k := min(left, int64(len(buf)))
		if _, err := tc.Write(buf[:k]); err != nil {
			t.Fatal(err)
		}
		left -= k
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	got, _ := strconv.ParseInt(string(b), 10, 64)
	return got
}

type bufConn struct {
	net.Conn
	r io.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// keptAlive sends req (its "Connection: close" dropped) rounds times on one
// connection (through a CONNECT to connect unless it is "") and returns the
// median time of a request and its response.
func keptAlive(t *testing.T, addr, connect string, conf *tls.Config, req string, rounds int) time.Duration {
	t.Helper()
	req = strings.Replace(req, "Connection: close\r\n", "", 1)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	br := bufio.NewReader(c)
	var conn net.Conn = c
	if connect != "" {
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", connect, connect)
		if resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"}); err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		conn = &bufConn{Conn: c, r: br}
	}
	tc := tls.Client(conn, conf)
	tbr := bufio.NewReader(tc)
	ds := make([]time.Duration, 0, rounds)
	for range rounds {
		start := time.Now()
		if _, err := io.WriteString(tc, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(tbr, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s %v", resp.Status, err)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[rounds/2]
}

// measureKeptAlive logs the p50 of a small GET on one kept-alive connection
// each way: what a client pool pays per request once connected.
func measureKeptAlive(t *testing.T, rounds int, direct, proxy, port string, conf func(string) *tls.Config, keyed, bare string) {
	t.Helper()
	ka := []time.Duration{
		keptAlive(t, direct, "", conf("api.test"), fmt.Sprintf(keyed, "api.test"), rounds),
		keptAlive(t, proxy, "tun.test:"+port, conf("tun.test"), fmt.Sprintf(keyed, "tun.test"), rounds),
		keptAlive(t, proxy, "api.test:"+port, conf("api.test"), bare, rounds),
	}
	t.Logf("small GET on a kept-alive HTTPS connection, p50 of %d: direct %s, CONNECT tunnel %s (+%s), interception %s (+%s)",
		rounds, ka[0], ka[1], ka[1]-ka[0], ka[2], ka[2]-ka[0])

}

// measureBulk logs rounds of bulk downloads, direct, through a tunnel and
// through the interception, and returns the function that times one.
func measureBulk(t *testing.T, bulk int, direct, proxy, port string, conf func(string) *tls.Config, host func() time.Duration) func(via, connect string, auth bool, n int64) float64 {
	t.Helper()
	zeros := func(host string, n int64, auth bool) string {
		s := "GET /zeros?n=" + strconv.FormatInt(n, 10) + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n"
		if auth {
			s += "Authorization: Bearer " + testSecret + "\r\n"
		}
		return s + "\r\n"
	}
	rate := func(via, connect string, auth bool, n int64) float64 {
		name := "api.test"
		if strings.HasPrefix(connect, "tun.") {
			name = "tun.test"
		}
		start := time.Now()
		if err := getOver(via, connect, conf(name), zeros(name, n, auth), int(n)); err != nil {
			t.Fatal(err)
		}
		return float64(n) / time.Since(start).Seconds() / (1 << 20)
	}
	// Rounds of three, direct, tunnel, interception, so that load from
	// elsewhere falls on all three; the medians of the ratios are logged, and
	// the median CPU time of this process (the client, and the proxy but for
	// direct) per round: what load from elsewhere changes least.
	const pairs = 5
	var ratios, tratios, ds, ts, is []float64
	var cpu, hcpu [3][]time.Duration
	timed := func(k int, via, connect string, auth bool) float64 {
		c0, h0 := processCPU(), host()
		r := rate(via, connect, auth, int64(bulk))
		cpu[k], hcpu[k] = append(cpu[k], processCPU()-c0), append(hcpu[k], host()-h0)
		return r
	}
	for range pairs {
		d := timed(0, direct, "", true)
		tu := timed(1, proxy, "tun.test:"+port, true)
		i := timed(2, proxy, "api.test:"+port, false)
		ds, ts, is = append(ds, d), append(ts, tu), append(is, i)
		ratios, tratios = append(ratios, i/d), append(tratios, tu/d)
	}
	slices.Sort(ratios)
	slices.Sort(tratios)
	for k := range cpu {
		slices.Sort(cpu[k])
		slices.Sort(hcpu[k])
	}
	t.Logf("bulk %d MiB, %d rounds: through the interception %.0f%% of direct (median; %.0f%% to %.0f%%), through a CONNECT tunnel %.0f%%; best: direct %.0f MiB/s, tunnel %.0f MiB/s, interception %.0f MiB/s; CPU of client and proxy per round (median): direct %s, tunnel %s, interception %s",
		bulk>>20, pairs, 100*ratios[pairs/2], 100*ratios[0], 100*ratios[pairs-1], 100*tratios[pairs/2], slices.Max(ds), slices.Max(ts), slices.Max(is),
		cpu[0][pairs/2].Round(time.Millisecond), cpu[1][pairs/2].Round(time.Millisecond), cpu[2][pairs/2].Round(time.Millisecond))
	logCeiling(t, bulk, [3]time.Duration{cpu[0][pairs/2], cpu[1][pairs/2], cpu[2][pairs/2]},
		[3]time.Duration{hcpu[0][pairs/2], hcpu[1][pairs/2], hcpu[2][pairs/2]})
	return rate
}

// logCeiling logs what bounds the interception's bulk rate on this machine,
// from the CPU the rounds took (medians; cpu is this process's: the client,
// and the proxy but for direct; host is the TLS host's) and the AES-GCM
// passes measured now: the proxy's least work is the tunnel's copying plus
// one decrypt (AES-256-GCM, which the host picks) and one encrypt
// (AES-128-GCM, to the kernel) per byte. With every core busy elsewhere the
// rates go as the CPU per byte. On idle cores direct is a pipeline of two
// processes, as fast as the busier one (client or host), and the
// interception's work can at best spread over all the cores. A report, not an
// assertion: both depend on the load beside the test.
func logCeiling(t *testing.T, bulk int, cpu, host [3]time.Duration) {
	t.Helper()
	dec, enc := gcmCPU(t, 32, bulk, true), gcmCPU(t, 16, bulk, false)
	d := cpu[0] + host[0]
	tunnel := max(cpu[1]+host[1]-d, 0)
	least, now := d+tunnel+dec+enc, cpu[2]+host[2]
	n := float64(runtime.NumCPU())
	pipe := float64(max(cpu[0], host[0]))
	ms := func(x time.Duration) string { return x.Round(time.Millisecond).String() }
	t.Logf("bulk ceiling per %d MiB (CPU, medians): direct %s (client %s, host %s); the tunnel adds %s; "+
		"AES-256-GCM decrypt %s (%.1f GB/s), AES-128-GCM encrypt %s (%.1f GB/s) on one core now; the interception %s (the proxy %s more than direct). "+
		"At most, with a proxy doing only the tunnel's copying and the two passes (%s): on busy cores (rate as 1/CPU) %.0f%% of direct, on %.0f idle cores %.0f%%; "+
		"with this proxy %.0f%% and %.0f%%",
		bulk>>20, ms(d), ms(cpu[0]), ms(host[0]), ms(tunnel), ms(dec), float64(bulk)/dec.Seconds()/1e9, ms(enc), float64(bulk)/enc.Seconds()/1e9,
		ms(now), ms(now-d), ms(least), 100*float64(d)/float64(least), n, 100*min(1, pipe*n/float64(least)),
		100*float64(d)/float64(now), 100*min(1, pipe*n/float64(now)))
}

// gcmCPU returns the CPU time of one thread sealing (or opening) n bytes in
// 16 KiB records with AES-GCM under a key of the given size.
func gcmCPU(t *testing.T, keySize, n int, open bool) time.Duration {
	t.Helper()
	block, err := aes.NewCipher(make([]byte, keySize))
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	const rec = 16 << 10
	nonce, plain := make([]byte, aead.NonceSize()), make([]byte, rec)
	sealed := aead.Seal(nil, nonce, plain, nil)
	out := make([]byte, 0, len(sealed))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0 := threadCPU()
	for range n / rec {
		if open {
			if _, err := aead.Open(out[:0], nonce, sealed, nil); err != nil {
				t.Fatal(err)
			}
		} else {
			aead.Seal(out[:0], nonce, plain, nil)
		}
	}
	return threadCPU() - c0
}

// threadCPU is the CPU time the calling thread has used
// (CLOCK_THREAD_CPUTIME_ID: getrusage's per-thread times come in ticks).
func threadCPU() time.Duration {
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3 /* CLOCK_THREAD_CPUTIME_ID */, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// hostCPU returns a function giving the CPU time the processes of the
// network namespace ns (a test host's server) have used.
func hostCPU(t *testing.T, ns string) func() time.Duration {
	t.Helper()
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		t.Fatalf("ip netns pids %s: %v", ns, err)
	}
	pids := strings.Fields(string(out))
	return func() time.Duration {
		var total time.Duration
		for _, pid := range pids {
			b, err := os.ReadFile("/proc/" + pid + "/stat")
			if err != nil {
				continue
			}
			// utime and stime, the 14th and 15th fields, in clock ticks
			// (100 a second on Linux), after the command's parenthesis.
			f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
			if len(f) < 13 {
				continue
			}
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			total += time.Duration(u+s) * 10 * time.Millisecond
		}
		return total
	}
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
