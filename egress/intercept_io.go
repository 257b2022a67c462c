package egress

import (
	"bufio"
	"io"
	"net"
	"sync"
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

// batchWriter sits below a TLS connection: while a batch is open (begin, end)
// the records the connection writes gather and go out in one write at end (or
// once maxBatch gathered), instead of one system call per 16 KiB record; with
// no batch open each write goes straight through. The asyncWriter above the
// TLS connection opens a batch around each of its writes; a write of the TLS
// connection's own (an alert, a key update) made meanwhile joins the batch in
// order. A failed write of a batch is end's error. The batch's buffer comes
// from batchBufs and goes back at end: an idle connection holds none.
type batchWriter struct {
	w   io.Writer
	mu  sync.Mutex
	on  bool
	buf []byte
	err error
}

// maxBatch bounds what a batchWriter gathers before it writes.
const maxBatch = 512 << 10

// batchBufs are the batches' buffers, shared by every connection.
var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, maxBatch); return &b }}

func (b *batchWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return 0, b.err
	}
	if !b.on {
		return b.w.Write(p)
	}
	if len(b.buf)+len(p) > maxBatch {
		if b.flush(); b.err != nil {
			return 0, b.err
		}
	}
	if len(p) >= maxBatch {
		return b.w.Write(p)
	}
	if b.buf == nil {
		b.buf = (*batchBufs.Get().(*[]byte))[:0]
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// begin opens a batch.
func (b *batchWriter) begin() {
	b.mu.Lock()
	b.on = true
	b.mu.Unlock()
}

// end writes out what the batch gathered and closes it.
func (b *batchWriter) end() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.on = false
	b.flush()
	if b.buf != nil {
		buf := b.buf[:0]
		batchBufs.Put(&buf)
		b.buf = nil
	}
	return b.err
}

// flush writes what gathered; with b.mu held.
func (b *batchWriter) flush() {
	if len(b.buf) == 0 || b.err != nil {
		b.buf = b.buf[:0]
		return
	}
	if _, err := b.w.Write(b.buf); err != nil {
		b.err = err
	}
	b.buf = b.buf[:0]
}

// idleReader sets conn's read deadline to idle from now before each read: a
// side silent for that long is cut. Once a read returned bytes, it goes on
// reading into the rest of b for as long as what arrived is already in memory
// (ahead, the read-ahead below the TLS connection, answers errNoWait rather
// than wait on the socket): a read returns every record that has arrived, not
// one, and never waits for more than the first.
type idleReader struct {
	r     io.Reader
	conn  net.Conn
	idle  time.Duration
	ahead *aheadReader
}

func (r *idleReader) Read(b []byte) (int, error) {
	r.conn.SetReadDeadline(time.Now().Add(r.idle))
	n, err := r.r.Read(b)
	if r.ahead == nil {
		return n, err
	}
	r.ahead.noWait = true
	for err == nil && n > 0 && n < len(b) {
		k, e := r.r.Read(b[n:])
		n += k
		if e == errNoWait {
			break
		}
		err = e
	}
	r.ahead.noWait = false
	return n, err
}

// aheadReader is the read-ahead below a TLS connection. While noWait is set it
// answers errNoWait instead of reading from the socket when it holds nothing:
// a temporary error, which a TLS connection returns without failing (as it
// does a read deadline's), keeping a partly read record for the next read.
type aheadReader struct {
	br     *bufio.Reader
	noWait bool
}

func (r *aheadReader) Read(b []byte) (int, error) {
	if r.noWait && r.br.Buffered() == 0 {
		return 0, errNoWait
	}
	return r.br.Read(b)
}

// errNoWait is an aheadReader's answer when it would have to wait.
var errNoWait error = noWaitError{}

type noWaitError struct{}

func (noWaitError) Error() string   { return "no more bytes arrived yet" }
func (noWaitError) Timeout() bool   { return true }
func (noWaitError) Temporary() bool { return true }

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

// asyncWriter hands what is written to it to a goroutine of its own, which
// writes out everything gathered since its last write in one: a lone small
// write (a server-sent event, a chunk of an upload) goes out at once, and while
// a write is in progress the next records gather, so that under load a bulk
// transfer takes few, large writes instead of one per 16 KiB TLS record. At
// most maxPending bytes wait (Write blocks beyond that). It is an
// io.ByteWriter, so that http.Request.Write uses it as it is instead of
// wrapping it in a bufio.Writer that would hold a streamed body's pieces back.
// Write, Flush and Close are for one goroutine at a time.
type asyncWriter struct {
	w       io.Writer
	batch   *batchWriter // below w, opened around each write; may be nil
	mu      sync.Mutex
	cond    sync.Cond
	buf     []byte // waiting to be written
	spare   []byte
	writing bool
	closed  bool
	err     error
	done    chan struct{}
}

// maxPending bounds the bytes an asyncWriter holds.
const maxPending = 256 << 10

func newAsyncWriter(w io.Writer, batch *batchWriter) *asyncWriter {
	a := &asyncWriter{w: w, batch: batch, done: make(chan struct{})}
	a.cond.L = &a.mu
	go a.run()
	return a
}

func (a *asyncWriter) run() {
	defer close(a.done)
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		for len(a.buf) == 0 && !a.closed {
			a.cond.Wait()
		}
		if len(a.buf) == 0 {
			return
		}
		out := a.buf
		a.buf, a.writing = a.spare[:0], true
		a.mu.Unlock()
		err := a.write(out)
		a.mu.Lock()
		a.spare, a.writing = out[:0], false
		if err != nil && a.err == nil {
			a.err = err
		}
		if a.err != nil {
			a.buf = a.buf[:0]
		}
		a.cond.Broadcast()
	}
}

// write writes out in one batch of the writer below.
func (a *asyncWriter) write(out []byte) error {
	if a.batch == nil {
		_, err := a.w.Write(out)
		return err
	}
	a.batch.begin()
	_, err := a.w.Write(out)
	if berr := a.batch.end(); err == nil {
		err = berr
	}
	return err
}

func (a *asyncWriter) Write(b []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.err == nil && len(a.buf) > 0 && len(a.buf)+len(b) > maxPending {
		a.cond.Wait()
	}
	if a.err != nil {
		return 0, a.err
	}
	a.buf = append(a.buf, b...)
	a.cond.Broadcast()
	return len(b), nil
}

// ReadFrom copies r to the writer, each read's bytes handed on as they come,
// in reads of up to readFromBuf bytes (io.Copy's own are 32 KiB).
func (a *asyncWriter) ReadFrom(r io.Reader) (int64, error) {
	bp := readFromBufs.Get().(*[]byte)
	defer readFromBufs.Put(bp)
	var total int64
	b := *bp
	for {
		n, err := r.Read(b)
		if n > 0 {
			if _, werr := a.Write(b[:n]); werr != nil {
				return total, werr
			}
			total += int64(n)
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// readFromBuf is the size of an asyncWriter's reads in ReadFrom.
const readFromBuf = 256 << 10

var readFromBufs = sync.Pool{New: func() any { b := make([]byte, readFromBuf); return &b }}

func (a *asyncWriter) WriteByte(b byte) error {
	_, err := a.Write([]byte{b})
	return err
}

// WriteString is io.StringWriter, which fmt and net/http use.
func (a *asyncWriter) WriteString(s string) (int, error) { return a.Write([]byte(s)) }

// Flush waits until everything written so far is out, and returns the first
// error a write had.
func (a *asyncWriter) Flush() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.err == nil && (len(a.buf) > 0 || a.writing) {
		a.cond.Wait()
	}
	return a.err
}

// Close stops the writer's goroutine once what is gathered is out (or a write
// failed) and waits for it; the caller cuts the connection first to abandon
// what is gathered.
func (a *asyncWriter) Close() {
	a.mu.Lock()
	a.closed = true
	a.cond.Broadcast()
	a.mu.Unlock()
	<-a.done
}
