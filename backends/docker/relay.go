package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// kernelbox's side of the relay (relayprog.go): a listener on the container's
// relay socket, in its state directory, that keeps the relay's idle connections
// and hands one to each HTTP or WebSocket connection the jupyter client makes
// (jupyter.Endpoint.Dial).
//
// Everything that arrives on the socket comes from the container (the state
// directory is 0700, or 0755 with a 0600 socket owned by the kernel's user when
// kernelbox is root, and mounted into that container only), where code the model
// wrote runs as the same user as the relay: it may kill the relay or connect to
// the socket itself. So the socket trusts nothing it is sent. What it holds is
// bounded - at most relayMaxIdle idle connections, relayMaxShakes connections
// whose kind is still unread (each for at most relayShakeTimeout), one control
// connection - and whatever exceeds a bound is closed at once, counted, and told
// in the log (at most once per relayWarnEvery). A refused connection also costs
// the accept loop relayRefusePause, so a flood cannot spin kernelbox's CPU. The
// worst such a kernel can do is break its own session's connection to its own
// server, which it could already do by killing the server.
const (
	relayMaxIdle      = 8
	relayMaxShakes    = 16
	relayShakeTimeout = 2 * time.Second
	relayRefusePause  = 5 * time.Millisecond
	relayWarnEvery    = 10 * time.Second
)

// errRelayGone is returned by relayHost.dial once the relay's control connection
// has ended: the relay exited or was killed.
var errRelayGone = errors.New("the relay to the container's server is gone (exited or killed in the container)")

// relayHost listens for one container's relay. It is safe for concurrent use.
type relayHost struct {
	ln      *net.UnixListener
	path    string
	log     *slog.Logger
	pool    chan *net.UnixConn // idle pooled connections
	shakes  chan struct{}      // semaphore of handshakes in progress
	ready   chan struct{}      // closed when the first control connection arrives
	gone    chan struct{}      // closed when that control connection ends
	closed  chan struct{}      // closed by close
	refused atomic.Int64       // connections refused since the start

	readyOnce, goneOnce, closeOnce sync.Once
	wg                             sync.WaitGroup

	mu       sync.Mutex
	control  *net.UnixConn // the relay's control connection; nil before it
	conns    map[*net.UnixConn]struct{}
	lastWarn time.Time
}

// listenRelay listens on dir/relaySocketName, replacing a socket file left there
// by an earlier process (adoption), and hands the socket to uid:gid when chown.
func listenRelay(dir string, chown bool, uid, gid int, log *slog.Logger) (*relayHost, error) {
	path := filepath.Join(dir, relaySocketName)
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == os.ModeSocket {
		_ = os.Remove(path)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("relay: listen: %w", err)
	}
	// The directory goes with the container; never unlink by path afterwards.
	ln.SetUnlinkOnClose(false)
	if err := handSocket(path, chown, uid, gid); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("relay: %w", err)
	}
	h := &relayHost{
		ln: ln, path: path, log: log,
		pool:   make(chan *net.UnixConn, relayMaxIdle),
		shakes: make(chan struct{}, relayMaxShakes),
		ready:  make(chan struct{}), gone: make(chan struct{}), closed: make(chan struct{}),
		conns: map[*net.UnixConn]struct{}{},
	}
	h.wg.Go(h.accept)
	return h, nil
}

// handSocket makes the socket at path connectable by the kernel's user only: 0600,
// owned by uid:gid when kernelbox is root (chown), else by kernelbox's own user,
// which is then the kernel's.
func handSocket(path string, chown bool, uid, gid int) error {
	if chown {
		if err := os.Lchown(path, uid, gid); err != nil {
			return err
		}
	}
	return os.Chmod(path, 0o600)
}

// accept takes the relay's connections until the listener closes.
func (h *relayHost) accept() {
	for {
		c, err := h.ln.AcceptUnix()
		if err != nil {
			return
		}
		select {
		case h.shakes <- struct{}{}:
			h.wg.Go(func() {
				defer func() { <-h.shakes }()
				h.shake(c)
			})
		default:
			h.refuse(c, "too many connections not yet saying their kind")
		}
	}
}

// shake reads a new connection's kind and keeps it as the control connection or
// an idle one, or refuses it.
func (h *relayHost) shake(c *net.UnixConn) {
	var kind [1]byte
	_ = c.SetReadDeadline(time.Now().Add(relayShakeTimeout))
	_, err := c.Read(kind[:])
	_ = c.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		h.refuse(c, "no kind within "+relayShakeTimeout.String())
	case kind[0] == 'P':
		if !h.track(c) {
			return
		}
		select {
		case h.pool <- c:
		default:
			h.untrack(c)
			h.refuse(c, fmt.Sprintf("more than %d idle connections", relayMaxIdle))
		}
	case kind[0] == 'C':
		h.mu.Lock()
		first := h.control == nil
		select {
		case <-h.closed:
			first = false
		default:
		}
		if first {
			h.control = c
		}
		h.mu.Unlock()
		if !first {
			h.refuse(c, "a second control connection")
			return
		}
		h.readyOnce.Do(func() { close(h.ready) })
		// The relay never writes on it: any read's end is the relay's.
		_, _ = c.Read(kind[:])
		select {
		case <-h.closed:
		default:
			h.goneOnce.Do(func() { close(h.gone) })
		}
		_ = c.Close()
	default:
		h.refuse(c, fmt.Sprintf("unknown kind %q", kind[0]))
	}
}

// refuse closes c, counts it and warns, at most once per relayWarnEvery.
func (h *relayHost) refuse(c *net.UnixConn, why string) {
	_ = c.Close()
	n := h.refused.Add(1)
	h.mu.Lock()
	warn := time.Since(h.lastWarn) >= relayWarnEvery
	if warn {
		h.lastWarn = time.Now()
	}
	h.mu.Unlock()
	if warn {
		h.log.Warn("relay: refused a connection from the container (its kernel may be flooding the relay's socket)",
			"reason", why, "refused_total", n)
	}
	time.Sleep(relayRefusePause)
}

// track records c so that close closes it; false when closing already.
func (h *relayHost) track(c *net.UnixConn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.closed:
		_ = c.Close()
		return false
	default:
	}
	h.conns[c] = struct{}{}
	return true
}

// untrack forgets c.
func (h *relayHost) untrack(c *net.UnixConn) {
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
}

// dial returns an idle connection to the container's server, waiting for the
// relay to open one when none is idle, until ctx ends, the relay is gone or the
// host is closed. A connection the relay closed while idle is dropped.
func (h *relayHost) dial(ctx context.Context) (net.Conn, error) {
	for {
		select {
		case c := <-h.pool:
			h.untrack(c)
			if idle(c) {
				return c, nil
			}
			_ = c.Close()
			continue
		case <-h.gone:
			return nil, errRelayGone
		case <-h.closed:
			return nil, net.ErrClosed
		case <-ctx.Done():
			return nil, fmt.Errorf("relay: no connection from the container's relay: %w", ctx.Err())
		}
	}
}

// idle reports whether c is open with nothing to read: the relay sends nothing on
// a pooled connection before kernelbox writes, so data or an end means it is not
// a usable one.
func idle(c *net.UnixConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, rerr := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		ok = errors.Is(rerr, unix.EAGAIN)
		return true
	})
	return ok
}

// waitReady waits until the relay's control connection arrives.
func (h *relayHost) waitReady(ctx context.Context) error {
	select {
	case <-h.ready:
		return nil
	case <-h.gone:
		return errRelayGone
	case <-h.closed:
		return net.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Gone is closed once the relay has gone (its control connection ended).
func (h *relayHost) Gone() <-chan struct{} { return h.gone }

// close stops listening and closes every connection it holds (not those handed
// out by dial, which their users close), then waits for its goroutines.
func (h *relayHost) close() {
	if h == nil {
		return
	}
	h.closeOnce.Do(func() {
		h.mu.Lock()
		close(h.closed)
		for c := range h.conns {
			_ = c.Close()
		}
		if h.control != nil {
			_ = h.control.Close()
		}
		h.mu.Unlock()
		_ = h.ln.Close()
		h.wg.Wait()
		for len(h.pool) > 0 {
			_ = (<-h.pool).Close()
		}
	})
}
