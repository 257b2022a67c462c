package egress

import (
	"io"
	"net"
	"sync/atomic"
	"time"
)

// The readers and writers of an intercepted connection (intercept.go).

// countConn is a connection whose reads come from r (which may hold bytes
// already read from it) and whose writes are counted against the session's
// byte limit.
type countConn struct {
	net.Conn
	r io.Reader
	w io.Writer
}

func (c *countConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *countConn) Write(b []byte) (int, error) { return c.w.Write(b) }

// atomicCounter counts the bytes written through it into n, which other
// goroutines read, and against the proxy's session total: a TLS connection
// may write from its reading goroutine (a key update), so the count is atomic.
type atomicCounter struct {
	w io.Writer
	p *Proxy
	n *atomic.Int64
}

func (a *atomicCounter) Write(b []byte) (int, error) {
	if !a.p.spend(int64(len(b))) {
		return 0, errByteLimit
	}
	n, err := a.w.Write(b)
	a.n.Add(int64(n))
	return n, err
}

// idleReader sets conn's read deadline to idle from now before each read: a
// side silent for that long is cut.
type idleReader struct {
	r    io.Reader
	conn net.Conn
	idle time.Duration
}

func (r *idleReader) Read(b []byte) (int, error) {
	r.conn.SetReadDeadline(time.Now().Add(r.idle))
	return r.r.Read(b)
}

// headLimit reads from r at most n bytes while n >= 0 (then io.EOF, and hit is
// set); a negative n is no limit. It bounds a head that http.ReadRequest
// reads through a bufio.Reader above it, as net/http's server does.
type headLimit struct {
	r   io.Reader
	n   int64
	hit bool
}

func (l *headLimit) Read(b []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(b)
	}
	if l.n == 0 {
		l.hit = true
		return 0, io.EOF
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.r.Read(b)
	l.n -= int64(n)
	return n, err
}

// coalescer gathers small writes (a head's lines, a chunk's size line) into one
// buffer, written out by Flush or by a write that does not fit; big writes go
// straight through. It is an io.ByteWriter, so that http.Request.Write uses it
// as it is instead of wrapping it in a bufio.Writer that would hold a streamed
// body's small pieces back.
type coalescer struct {
	w   io.Writer
	buf []byte
}

const coalesceBytes = 16 << 10

func (c *coalescer) Write(b []byte) (int, error) {
	if len(c.buf)+len(b) <= coalesceBytes {
		c.buf = append(c.buf, b...)
		return len(b), nil
	}
	if err := c.Flush(); err != nil {
		return 0, err
	}
	if len(b) <= coalesceBytes/4 {
		c.buf = append(c.buf, b...)
		return len(b), nil
	}
	return c.w.Write(b)
}

func (c *coalescer) WriteByte(b byte) error {
	_, err := c.Write([]byte{b})
	return err
}

// WriteString is io.StringWriter, which fmt and net/http use.
func (c *coalescer) WriteString(s string) (int, error) { return c.Write([]byte(s)) }

// Flush writes what is gathered.
func (c *coalescer) Flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.w.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}

// flushingBody flushes w before each read of a body: what was read so far goes
// out before the proxy waits for more, so a server-sent event, a chunk of an
// upload or a slow download's bytes arrive as they are sent.
type flushingBody struct {
	io.ReadCloser
	w *coalescer
}

func (f *flushingBody) Read(b []byte) (int, error) {
	if err := f.w.Flush(); err != nil {
		return 0, err
	}
	return f.ReadCloser.Read(b)
}
