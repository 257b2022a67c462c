package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernelbox/kernelbox/httpapi"
)

// The connection cap of `kernelbox serve` (issue 21 item 4): idle keep-alive
// connections of an unauthenticated flood must not take the process to its file
// limit, where accept fails for everyone. The rule:
//
//   - Below max-reserve open connections, a connection is served as usual.
//   - The last reserve slots are for requests that prove themselves: a
//     connection accepted there is served only while its requests carry the
//     token or ask for /healthz; httpapi's guard answers any other request
//     503 too_many_connections and closes the connection, freeing the slot
//     (connLimiter is its httpapi.ConnReserve).
//   - At max, a new connection is accepted and closed at once (logged at most
//     every 10 s, counted in kernelbox_http_connections_refused_total).
//
// No open connection is ever cut for another, so a live SSE or MCP stream keeps
// its slot; idle ones end after --conn-idle-timeout, silent ones after the
// header timeout. In the reserved slots both are reservedWait instead, so that
// silent connections cannot hold the reserve for long.

// defaultMaxConns derives --max-conns from the process's file limit (which Go
// raises to the hard limit at start): the limit minus a quarter of it (at least
// 64, at most 1024 descriptors) for kernels, files and the backend, between 64
// and 16384.
func defaultMaxConns() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 1024
	}
	limit := int(min(rl.Cur, 1<<30))
	return min(max(limit-min(max(limit/4, 64), 1024), 64), 16384)
}

// reserveFor is how many of max connections are kept for authenticated calls
// and /healthz: 32, or a quarter of a small max.
func reserveFor(maxConns int) int { return min(32, max(maxConns/4, 1)) }

// connLimiter is a net.Listener that keeps at most max connections open, and
// the reserve httpapi's guard checks.
type connLimiter struct {
	net.Listener
	max, reserve int
	log          *slog.Logger

	mu       sync.Mutex
	open     int
	lastWarn time.Time

	refused         atomic.Int64 // closed at accept: the cap was reached
	refusedReserved atomic.Int64 // closed after a request the reserve does not serve
}

var _ httpapi.ConnReserve = (*connLimiter)(nil)

func newConnLimiter(ln net.Listener, maxConns int, log *slog.Logger) *connLimiter {
	return &connLimiter{Listener: ln, max: maxConns, reserve: reserveFor(maxConns), log: log}
}

// Accept returns the next connection under the cap, closing those over it.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.open >= l.max {
			warn := time.Since(l.lastWarn) > 10*time.Second
			if warn {
				l.lastWarn = time.Now()
			}
			l.mu.Unlock()
			_ = c.Close()
			if n := l.refused.Add(1); warn {
				l.log.Warn("connection refused: the server is at --max-conns", "max_conns", l.max, "refused_total", n)
			}
			continue
		}
		l.open++
		reserved := l.open > l.max-l.reserve
		l.mu.Unlock()
		return &limitedConn{Conn: c, l: l, reserved: reserved}, nil
	}
}

func (l *connLimiter) release() {
	l.mu.Lock()
	l.open--
	l.mu.Unlock()
}

func (l *connLimiter) openConns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// register adds the limiter's gauges and counters to reg.
func (l *connLimiter) register(reg *prometheus.Registry) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kernelbox_http_connections_open", Help: "HTTP connections open, counted against --max-conns."},
			func() float64 { return float64(l.openConns()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kernelbox_http_connections_refused_total", Help: "HTTP connections closed at accept because --max-conns were open."},
			func() float64 { return float64(l.refused.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kernelbox_http_connections_reserve_refused_total", Help: "HTTP connections in the reserved slots closed after a request without the token."},
			func() float64 { return float64(l.refusedReserved.Load()) }),
	)
}

// limitedConn is a connection counted by its limiter until closed.
type limitedConn struct {
	net.Conn
	l        *connLimiter
	reserved bool // accepted into the reserved slots
	once     sync.Once
}

// reservedWait bounds how long a connection in the reserved slots may take to
// send a request's headers, and how long it may stay idle between requests.
const reservedWait = 2 * time.Second

// SetReadDeadline shortens, on a reserved connection, the deadlines net/http
// sets while waiting for a request (header timeout, idle timeout). A zero
// deadline, which it sets once the headers are read, is left alone, so a request
// being served, such as an event stream, is never cut.
func (c *limitedConn) SetReadDeadline(t time.Time) error {
	if c.reserved && !t.IsZero() {
		if limit := time.Now().Add(reservedWait); t.After(limit) {
			t = limit
		}
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.l.release)
	return err
}

type connKey struct{}

// connContext is http.Server.ConnContext: it lets Reserved see the connection.
func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// Reserved reports whether r arrived on a connection accepted into l's reserved
// slots (httpapi.ConnReserve): httpapi's guard serves it only when it carries
// the token or asks for a probe route (/healthz), and otherwise answers 503
// too_many_connections and closes the connection.
func (l *connLimiter) Reserved(r *http.Request) bool {
	c, _ := r.Context().Value(connKey{}).(*limitedConn)
	return c != nil && c.l == l && c.reserved
}

// Refused counts a request the guard refused on a reserved connection.
func (l *connLimiter) Refused() { l.refusedReserved.Add(1) }
