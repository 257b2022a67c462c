package egress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// openFDs counts the test process's open descriptors.
func openFDs(tb testing.TB) int {
	tb.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	return len(es)
}

// heapInUse returns the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestProxyIdleFlood is issue 47 item 1: a kernel opening thousands of
// connections to its proxy that never send a request. Each counts against the
// session's max_conns from its accept: the proxy holds at most max_conns of them
// (before, every one was held until its head timeout, 10 s, and the server ran
// out of descriptors), answers the rest 403 at once, and another session's proxy
// sharing the server's Limiter still answers within a second. Descriptors and
// heap come back when the connections go. About 2 s.
func TestProxyIdleFlood(t *testing.T) {
	const flood = 3000
	lim := NewLimiter(256, 64)
	flooded := newTestNet(t, allowTest(true, func(p *Policy) { p.MaxConns = 16 }), func(o *Options) { o.Limiter = lim })
	other := newTestNet(t, allowTest(true, nil), func(o *Options) { o.Limiter = lim; o.Session = "s2" })
	runtime.GC()
	fds0, heap0 := openFDs(t), heapInUse()

	conns := make([]net.Conn, 0, flood)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	for range flood {
		c, err := net.Dial("tcp", flooded.addr)
		if err != nil {
			t.Fatalf("after %d connections: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	// Every connection past max_conns is answered at once; wait for the answers.
	refused := 0
	for _, c := range conns[16:] {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		if strings.Contains(string(b), "403") && strings.Contains(string(b), "connection limit") {
			refused++
		}
	}
	t.Logf("%d idle connections opened and %d of them refused in %s", flood, refused, time.Since(start).Round(time.Millisecond))
	if refused != flood-16 {
		t.Fatalf("%d of %d connections past max_conns refused", refused, flood-16)
	}
	st := flooded.proxy.Stats()
	server := openFDs(t) - fds0 - flood // the server's side of the flood
	t.Logf("during the flood: proxy %+v, server-side descriptors %d, limiter %+v", st, server, lim.Stats())
	if st.Active > 16 || server > 16+lingerSlots+16 {
		t.Fatalf("the proxy holds %d connections and %d descriptors for a max_conns of 16", st.Active, server)
	}

	// Another session's egress answers within a second.
	t0 := time.Now()
	status, body := other.raw(t, fmt.Sprintf("GET http://files.test:%d/data.csv HTTP/1.1\r\nHost: files.test:%d\r\n\r\n", other.httpPort, other.httpPort))
	if took := time.Since(t0); !strings.HasPrefix(status, "200") || took > time.Second {
		t.Fatalf("the other session's request during the flood: %s %q after %s", status, body, took)
	} else {
		t.Logf("another session's GET during the flood: %s", took.Round(time.Microsecond))
	}

	for _, c := range conns {
		c.Close()
	}
	conns = nil
	deadline := time.Now().Add(10 * time.Second)
	for flooded.proxy.Stats().Active > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(lingerFor + 50*time.Millisecond)
	fds1, heap1 := openFDs(t), heapInUse()
	t.Logf("after: descriptors %d (before %d), heap in use %.1f MB (before %.1f MB), limiter %+v",
		fds1, fds0, float64(heap1)/1e6, float64(heap0)/1e6, lim.Stats())
	if fds1 > fds0+4 {
		t.Errorf("descriptors not back: %d, before %d", fds1, fds0)
	}
	if heap1 > heap0+8<<20 {
		t.Errorf("heap not back: %d, before %d", heap1, heap0)
	}
	if u := lim.Stats().Used; u != 0 {
		t.Errorf("the limiter holds %d connections after all closed", u)
	}
}

// TestProxySharedLimiter: when the proxies sharing a Limiter hold all its
// connections, one more is refused at accept with the server's rule, and one
// session cannot hold more than its PerSession share whatever its max_conns.
func TestProxySharedLimiter(t *testing.T) {
	t.Parallel()
	lim := NewLimiter(8, 4)
	a := newTestNet(t, allowTest(true, func(p *Policy) { p.MaxConns = 100 }), func(o *Options) { o.Limiter = lim })
	b := newTestNet(t, allowTest(true, func(p *Policy) { p.MaxConns = 100 }), func(o *Options) { o.Limiter = lim })
	hold := func(n *testNet, k int) []net.Conn {
		var cs []net.Conn
		for range k {
			c, err := net.Dial("tcp", n.addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			cs = append(cs, c)
		}
		return cs
	}
	hold(a, 4)
	waitActive(t, a.proxy, 4)
	status, body := a.raw(t, "GET http://files.test/ HTTP/1.1\r\nHost: files.test\r\n\r\n")
	if !strings.HasPrefix(status, "403") || !strings.Contains(body, "the limit is 4") {
		t.Fatalf("a fifth connection of one session: %s %q", status, body)
	}
	hold(b, 4)
	waitActive(t, b.proxy, 4)
	c := hold(a, 1)[0]
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, _ := io.ReadAll(c)
	if !strings.Contains(string(got), "server connection limit") {
		t.Fatalf("a connection past the server's limit: %q", got)
	}
	if st := lim.Stats(); st.Used != 8 || st.Refused < 1 {
		t.Fatalf("limiter %+v", st)
	}
}

func waitActive(tb testing.TB, p *Proxy, n int) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().Active != n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if a := p.Stats().Active; a != n {
		tb.Fatalf("%d connections active; want %d", a, n)
	}
}

// failingListener fails its first n accepts with err, then accepts from the
// listener it wraps.
type failingListener struct {
	net.Listener
	mu  sync.Mutex
	n   int
	err error
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.n > 0 {
		l.n--
		l.mu.Unlock()
		return nil, l.err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// lockedBuffer is a log sink safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestProxyAcceptSurvivesEMFILE: an accept that fails because the process is
// out of descriptors is counted, logged once for the run, retried after a
// back-off, and the proxy serves the next connection; before, Serve returned
// and the session's egress was dead without a word. About 0.3 s (the back-off doubling from 5 ms).
func TestProxyAcceptSurvivesEMFILE(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	n := newTestNet(t, allowTest(true, nil), nil)
	px, err := New(Options{Rules: n.proxy.o.Rules, TestHosts: n.proxy.o.TestHosts, Session: "s1",
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const fails = 6
	served := make(chan error, 1)
	go func() {
		served <- px.Serve(&failingListener{Listener: ln, n: fails, err: &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}})
	}()
	defer func() {
		px.Close()
		if err := <-served; !errors.Is(err, ErrClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()
	m := &testNet{proxy: px, addr: ln.Addr().String()}
	status, body := m.raw(t, "GET http://files.test:"+strconv.Itoa(n.httpPort)+"/data.csv HTTP/1.1\r\nHost: files.test:"+strconv.Itoa(n.httpPort)+"\r\n\r\n")
	if !strings.HasPrefix(status, "200") || body != "a,b\n1,2\n" {
		t.Fatalf("after %d failed accepts: %s %q", fails, status, body)
	}
	if st := px.Stats(); st.AcceptErrors != fails {
		t.Fatalf("stats %+v; want %d accept errors", st, fails)
	}
	out := logs.String()
	if strings.Count(out, "egress accept failed") != 1 || !strings.Contains(out, "too many open files") ||
		!strings.Contains(out, "egress accept recovered") || !strings.Contains(out, "failed_accepts="+strconv.Itoa(fails)) {
		t.Fatalf("log:\n%s", out)
	}
}

// TestProxyStopLogged: a listener that fails for good ends Serve with its
// error, logged, never silently.
func TestProxyStopLogged(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	px, err := New(Options{Rules: mustCompile(t, Policy{}), Session: "s1", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	bad := errors.New("listener broke")
	if err := px.Serve(&failingListener{Listener: ln, n: 1, err: bad}); !errors.Is(err, bad) {
		t.Fatalf("Serve: %v", err)
	}
	if !strings.Contains(logs.String(), "egress proxy stopped accepting") {
		t.Fatalf("log: %q", logs.String())
	}
}

// TestProxyRefusalLogBounded is issue 47 item 5: 400 connections that send no
// request log a handful of lines and one aggregate (count, first, last) rather
// than a line each; every connection is still recorded. About 1 s.
func TestProxyRefusalLogBounded(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	n := newTestNet(t, allowTest(true, nil), func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	const k = 400
	for range k {
		c, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	deadline := time.Now().Add(20 * time.Second)
	for n.proxy.Stats().Connections < k && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	n.proxy.Close()
	out := logs.String()
	lines := strings.Count(out, "\n")
	t.Logf("%d refusals, %d log lines (%d bytes); the aggregate: %s", k, lines, len(out), lastLine(out))
	if lines > refusalBurst+2 {
		t.Fatalf("%d log lines for %d refusals:\n%s", lines, k, out)
	}
	if !strings.Contains(out, "egress refused, more") || !strings.Contains(out, "count="+strconv.Itoa(k-refusalBurst)) ||
		!strings.Contains(out, "first_at=") || !strings.Contains(out, "last_at=") || !strings.Contains(out, "session=s1") {
		t.Fatalf("no aggregate line:\n%s", out)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.records) != k {
		t.Fatalf("%d records for %d connections", len(n.records), k)
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}
