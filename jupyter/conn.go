package jupyter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
)

// ConnOptions configures a kernel WebSocket. The zero value works.
type ConnOptions struct {
	// SessionID is the client session id sent as the session_id query parameter.
	// Reconnecting with the same id makes Jupyter Server replay the messages it
	// buffered while no client was connected. Defaults to a random UUID.
	SessionID string

	// Protocol selects the framing. Defaults to ProtocolAuto.
	Protocol Protocol

	// MaxMessageBytes bounds the memory one incoming message may take. A larger
	// message is cut: its headers and the start of its stream text are kept and it
	// is marked Truncated. Defaults to 32 MiB.
	MaxMessageBytes int

	// SalvageBytes is how much of an oversized stream message's text is kept (its
	// start). Defaults to MaxMessageBytes; a caller that caps output itself sets
	// its cap here, so that a huge message costs no more than that.
	SalvageBytes int

	// ReconnectTimeout bounds how long a dropped WebSocket is re-dialled before
	// calls in flight fail with ErrConnectionLost. Defaults to 5 seconds; a negative
	// value disables reconnecting.
	ReconnectTimeout time.Duration

	// PingInterval is how often the client pings the server; a connection silent
	// for three intervals is treated as dropped. Defaults to 15 seconds.
	PingInterval time.Duration

	// Logger receives debug logs. Defaults to discarding them.
	Logger *slog.Logger
}

// writeBuffers pools the connections' write buffers (gorilla/websocket holds one only
// while a message is being written). It is shared by every connection of the process,
// like any allocator cache; it holds no state of its own.
var writeBuffers = &sync.Pool{}

const writeBufferSize = 4 << 20

// Conn is one WebSocket connection to one kernel. One goroutine reads and routes
// messages to the calls waiting for them; writes are serialized. All methods are safe
// for concurrent use. A Conn whose connection dropped re-dials with the same session id;
// if that fails, every call in flight and every later call fails with an error
// wrapping ErrConnectionLost, and the Conn must be replaced. When the server reports
// the kernel's death, calls fail with an error wrapping ErrKernelDied and the Conn
// stops too: connect again once the server has restarted the kernel.
type Conn struct {
	client   *Client
	kernelID string
	opts     ConnOptions
	log      *slog.Logger

	wmu   sync.Mutex // serializes writes and swaps of ws
	ws    *websocket.Conn
	proto Protocol // ProtocolLegacy or ProtocolV1 once connected

	mu      sync.Mutex
	pending map[string]*call
	err     error // terminal error, set once

	closing   atomic.Bool // set by Close and on kernel death: a read error is not a drop
	closeOnce sync.Once
	stop      chan struct{} // closed by Close
	done      chan struct{} // closed when the reader exits
	wg        sync.WaitGroup
}

// call is one request waiting for its answer.
type call struct {
	id      string
	execute bool
	msgs    chan *Message // execute only: output messages
	// queued counts the bytes of the messages in msgs, and taken is signalled
	// when Next takes one: the reader stops reading (and so the server stops
	// sending) while more than maxQueuedBytes wait, so that a cell printing
	// gigabytes cannot fill memory with messages nobody has read yet.
	queued atomic.Int64
	taken  chan struct{}
	gone   chan struct{} // closed when the caller abandons the call
	done   chan struct{} // closed on completion or failure
	once   sync.Once

	// written by the reader goroutine before done is closed
	reply *Message
	idle  bool
	err   error
}

func (c *call) finish(err error) {
	c.once.Do(func() {
		c.err = err
		close(c.done)
	})
}

// Connect opens a WebSocket to the kernel's channels.
func (c *Client) Connect(ctx context.Context, kernelID string, opts *ConnOptions) (*Conn, error) {
	var o ConnOptions
	if opts != nil {
		o = *opts
	}
	if o.SessionID == "" {
		o.SessionID = uuid.NewString()
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 32 << 20
	}
	if o.SalvageBytes <= 0 || o.SalvageBytes > o.MaxMessageBytes {
		o.SalvageBytes = o.MaxMessageBytes
	}
	if o.ReconnectTimeout == 0 {
		o.ReconnectTimeout = 5 * time.Second
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 15 * time.Second
	}
	if o.Logger == nil {
		o.Logger = c.log
	}
	conn := &Conn{
		client:   c,
		kernelID: kernelID,
		opts:     o,
		log:      o.Logger.With("kernel_id", kernelID),
		pending:  make(map[string]*call),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	ws, proto, err := conn.dial(ctx)
	if err != nil {
		return nil, err
	}
	conn.ws, conn.proto = ws, proto
	conn.wg.Add(2)
	go conn.readLoop()
	go conn.pingLoop()
	return conn, nil
}

// KernelID returns the id of the kernel this connection talks to.
func (c *Conn) KernelID() string { return c.kernelID }

// SessionID returns the client session id.
func (c *Conn) SessionID() string { return c.opts.SessionID }

// Protocol returns the framing in use: ProtocolLegacy or ProtocolV1.
func (c *Conn) Protocol() Protocol {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.proto
}

// Done is closed when the connection has stopped for good (Close, or a drop that
// could not be repaired); Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection stopped, or nil while it is running.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the WebSocket and fails calls in flight with ErrClosed. It waits for
// the connection's goroutines to exit.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.closing.Store(true)
		close(c.stop)
		c.wmu.Lock()
		ws := c.ws
		c.wmu.Unlock()
		_ = ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		if cerr := ws.Close(); !errors.Is(cerr, net.ErrClosed) {
			err = cerr // a socket a kernel death already closed is no error
		}
	})
	c.wg.Wait()
	return err
}

// dial opens the WebSocket, negotiating the framing.
func (c *Conn) dial(ctx context.Context) (*websocket.Conn, Protocol, error) {
	ep := c.client.ep
	u := *c.client.base
	if u.Scheme == "https" {
		u.Scheme = "wss"
	} else {
		u.Scheme = "ws"
	}
	u.Path = c.client.base.Path + "/api/kernels/" + url.PathEscape(c.kernelID) + "/channels"
	u.RawQuery = url.Values{"session_id": {c.opts.SessionID}}.Encode()
	// gorilla/websocket bounds the handshake by ctx's deadline but does not watch
	// ctx for cancellation: a handshake the server holds open (Jupyter Server waits
	// for the kernel's kernel_info reply before it answers) would outlive a cancel.
	// A past deadline set on the socket when ctx ends unblocks it.
	var unwatch func() bool
	base := ep.dialer()
	dialSocket := func(dctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := base(dctx, network, addr)
		if err == nil {
			unwatch = context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
		}
		return nc, err
	}
	d := websocket.Dialer{
		NetDialContext:   dialSocket,
		TLSClientConfig:  ep.TLS,
		HandshakeTimeout: 30 * time.Second,
		ReadBufferSize:   64 << 10,
		// Large writes go out as one frame: Jupyter Server (tornado) joins the
		// frames of a fragmented message by repeated concatenation, which is
		// quadratic (a 4 MiB message in 16 KiB frames took seconds). The buffer is
		// pooled, so an idle connection holds none.
		WriteBufferSize: writeBufferSize,
		WriteBufferPool: writeBuffers,
	}
	if c.opts.Protocol != ProtocolLegacy {
		d.Subprotocols = []string{SubprotocolV1}
	}
	ws, resp, err := d.DialContext(ctx, u.String(), ep.authHeader())
	if unwatch != nil && !unwatch() {
		// ctx ended during the handshake: the socket's deadline is spent.
		if ws != nil {
			ws.Close()
		}
		if resp != nil {
			resp.Body.Close()
		}
		return nil, 0, fmt.Errorf("connect to kernel %s: %w", c.kernelID, context.Cause(ctx))
	}
	if err != nil {
		if resp != nil {
			defer resp.Body.Close()
			return nil, 0, fmt.Errorf("connect to kernel %s: %w", c.kernelID, httpError(http.MethodGet, u.Path, resp))
		}
		return nil, 0, fmt.Errorf("connect to kernel %s: %w", c.kernelID, err)
	}
	proto := ProtocolLegacy
	if ws.Subprotocol() == SubprotocolV1 {
		proto = ProtocolV1
	} else if c.opts.Protocol == ProtocolV1 {
		ws.Close()
		return nil, 0, fmt.Errorf("connect to kernel %s: server does not speak %s", c.kernelID, SubprotocolV1)
	}
	ws.SetPongHandler(func(string) error { return c.extendDeadline(ws) })
	_ = c.extendDeadline(ws)
	return ws, proto, nil
}

func (c *Conn) extendDeadline(ws *websocket.Conn) error {
	return ws.SetReadDeadline(time.Now().Add(3 * c.opts.PingInterval))
}

// send writes one message.
func (c *Conn) send(ctx context.Context, m *Message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var data []byte
	var err error
	frame := websocket.TextMessage
	if c.proto == ProtocolV1 {
		data, err = encodeV1(m)
		frame = websocket.BinaryMessage
	} else {
		data, err = encodeLegacy(m)
	}
	if err != nil {
		return fmt.Errorf("encode %s: %w", m.Header.MsgType, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.ws.SetWriteDeadline(deadline)
	if err := c.ws.WriteMessage(frame, data); err != nil {
		// A Close or kernel death that raced the write is the reason to report,
		// not the state of the socket it left behind.
		reason := c.Err()
		if reason == nil && c.closing.Load() {
			reason = ErrClosed
		}
		if reason != nil {
			err = reason
		}
		return fmt.Errorf("send %s: %w", m.Header.MsgType, err)
	}
	return nil
}

// register adds a call for msgID, failing when the connection has stopped.
func (c *Conn) register(cl *call) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.pending[cl.id] = cl
	return nil
}

func (c *Conn) unregister(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Request sends a request on the shell or control channel and waits for its reply.
func (c *Conn) Request(ctx context.Context, channel, msgType string, content any) (*Message, error) {
	m, err := newMessage(c.opts.SessionID, channel, msgType, content)
	if err != nil {
		return nil, err
	}
	cl := &call{id: m.Header.MsgID, gone: make(chan struct{}), done: make(chan struct{})}
	if err := c.register(cl); err != nil {
		return nil, err
	}
	defer c.unregister(cl.id)
	if err := c.send(ctx, m); err != nil {
		return nil, err
	}
	select {
	case <-cl.done:
		if cl.err != nil {
			return nil, cl.err
		}
		return cl.reply, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", msgType, ctx.Err())
	}
}

// KernelInfo asks the kernel for its kernel_info_reply; a reply means the kernel is
// up and its channels are connected.
func (c *Conn) KernelInfo(ctx context.Context) (*Message, error) {
	return c.Request(ctx, ChannelShell, "kernel_info_request", struct{}{})
}

// pingLoop pings the server so that a silent dead peer is noticed.
func (c *Conn) pingLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.done:
			return
		case <-t.C:
			c.wmu.Lock()
			ws := c.ws
			c.wmu.Unlock()
			_ = ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(5*time.Second))
		}
	}
}

// readLoop is the one goroutine that reads the WebSocket.
func (c *Conn) readLoop() {
	defer c.wg.Done()
	defer close(c.done)
	for {
		c.wmu.Lock()
		ws, proto := c.ws, c.proto
		c.wmu.Unlock()
		m, err := c.read(ws, proto)
		if err == nil {
			c.dispatch(m)
			continue
		}
		if errors.Is(err, errMalformed) {
			c.log.Warn("dropping malformed kernel message", "err", err)
			continue
		}
		if c.closing.Load() {
			c.fail(ErrClosed) // keeps an earlier error, such as a kernel death
			return
		}
		c.log.Info("kernel websocket dropped; reconnecting", "err", err)
		if rerr := c.reconnect(); rerr != nil {
			if c.closing.Load() {
				c.fail(ErrClosed)
				return
			}
			c.fail(fmt.Errorf("%w: %v (reconnect: %v)", ErrConnectionLost, err, rerr))
			return
		}
	}
}

// read reads one message, bounding its memory by MaxMessageBytes.
func (c *Conn) read(ws *websocket.Conn, proto Protocol) (*Message, error) {
	frame, r, err := ws.NextReader()
	if err != nil {
		return nil, err
	}
	_ = c.extendDeadline(ws)
	data, total, err := readLimited(r, c.opts.MaxMessageBytes)
	if err != nil {
		return nil, err
	}
	if total > int64(len(data)) {
		// Headers come first; keep them and SalvageBytes of text.
		data = data[:min(len(data), c.opts.SalvageBytes+64<<10)]
		if proto == ProtocolV1 {
			return salvageV1(data, total)
		}
		return salvageLegacy(data, total)
	}
	switch {
	case proto == ProtocolV1:
		return decodeV1(data)
	case frame == websocket.BinaryMessage:
		return decodeLegacyBinary(data)
	default:
		return decodeLegacyText(data)
	}
}

// readLimited reads r to its end, keeping at most max bytes, and returns the total
// length read.
func readLimited(r io.Reader, max int) ([]byte, int64, error) {
	buf := make([]byte, 0, min(4096, max))
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= max {
				n, err := io.Copy(io.Discard, r)
				return buf, int64(len(buf)) + n, err
			}
			grow := cap(buf) * 2
			if grow > max {
				grow = max
			}
			nb := make([]byte, len(buf), grow)
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, int64(len(buf)), nil
		}
		if err != nil {
			return nil, 0, err
		}
	}
}

// reconnect re-dials with the same session id so the server replays what it buffered.
func (c *Conn) reconnect() error {
	if c.opts.ReconnectTimeout < 0 {
		return errors.New("reconnecting is disabled")
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.ReconnectTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	delay := 50 * time.Millisecond
	for {
		ws, proto, err := c.dial(ctx)
		if err == nil {
			c.wmu.Lock()
			if c.closing.Load() {
				// Close has already closed the socket it saw; nobody would close this one.
				c.wmu.Unlock()
				ws.Close()
				return ErrClosed
			}
			old := c.ws
			c.ws, c.proto = ws, proto
			c.wmu.Unlock()
			old.Close()
			c.log.Info("kernel websocket reconnected")
			c.mu.Lock()
			inflight := make([]*call, 0, len(c.pending))
			for _, cl := range c.pending {
				inflight = append(inflight, cl)
			}
			c.mu.Unlock()
			if len(inflight) > 0 {
				c.wg.Add(1)
				go c.watchAfterReconnect(inflight)
			}
			return nil
		}
		if errors.Is(err, ErrNotFound) {
			return err // the kernel is gone; no point retrying
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		if delay < time.Second {
			delay *= 2
		}
	}
}

// watchAfterReconnect fails calls that can no longer complete: messages the server
// wrote to the dropped socket are lost, so a call whose kernel has gone idle without
// its reply arriving would otherwise wait forever. Only the calls that were in flight
// during the drop are concerned: one started since may not have made the kernel busy
// yet.
func (c *Conn) watchAfterReconnect(inflight []*call) {
	defer c.wg.Done()
	select {
	case <-c.stop:
		return
	case <-time.After(2 * time.Second):
	}
	if !c.anyPending(inflight) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, err := c.client.Kernel(ctx, c.kernelID)
	if err != nil || k.ExecutionState != "idle" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range inflight {
		if c.pending[cl.id] == cl {
			cl.finish(fmt.Errorf("%w: the connection dropped during the call and the reply was lost (the kernel is idle)", ErrConnectionLost))
			delete(c.pending, cl.id)
		}
	}
}

// anyPending reports whether any of calls is still waiting.
func (c *Conn) anyPending(calls []*call) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range calls {
		if c.pending[cl.id] == cl {
			return true
		}
	}
	return false
}

// fail stops the connection for good, failing every call in flight.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
	for id, cl := range c.pending {
		cl.finish(c.err)
		delete(c.pending, id)
	}
}

// dispatch routes one message to the call it answers.
func (c *Conn) dispatch(m *Message) {
	if m.Channel == ChannelIOPub && m.Header.MsgType == "status" && m.ParentHeader.MsgID == "" {
		var st StatusContent
		_ = m.DecodeContent(&st)
		if st.ExecutionState == "restarting" || st.ExecutionState == "dead" {
			c.kernelDied(st.ExecutionState)
		}
		return
	}
	parent := m.ParentHeader.MsgID
	if parent == "" {
		return
	}
	c.mu.Lock()
	cl := c.pending[parent]
	c.mu.Unlock()
	if cl == nil {
		return // a message for someone else, or for a call already finished
	}
	switch {
	case m.Channel == ChannelShell || m.Channel == ChannelControl:
		cl.reply = m
		if !cl.execute || cl.idle {
			c.complete(cl)
		}
	case m.Channel != ChannelIOPub || !cl.execute:
		// stdin requests cannot happen (allow_stdin is false); iopub traffic of
		// non-execute requests is of no interest.
	case m.Header.MsgType == "status":
		var st StatusContent
		_ = m.DecodeContent(&st)
		if st.ExecutionState == "idle" {
			cl.idle = true
			if cl.reply != nil {
				c.complete(cl)
			}
		}
	case m.Header.MsgType == "execute_input":
	default:
		size := m.size()
		for cl.queued.Load() > 0 && cl.queued.Load()+size > maxQueuedBytes {
			select {
			case <-cl.taken:
			case <-cl.gone:
				return
			case <-c.stop:
				return
			}
		}
		cl.queued.Add(size)
		select {
		case cl.msgs <- m:
		case <-cl.gone:
		case <-c.stop:
		}
	}
}

// maxQueuedBytes bounds the output an execution holds that its reader has not taken
// yet (one message is always let through, whatever its size).
const maxQueuedBytes = 16 << 20

// size is the memory a message holds, roughly.
func (m *Message) size() int64 {
	n := len(m.Content) + len(m.Metadata)
	for _, b := range m.Buffers {
		n += len(b)
	}
	return int64(n)
}

func (c *Conn) complete(cl *call) {
	c.unregister(cl.id)
	cl.finish(nil)
}

// kernelDied ends the connection: a kernel the server restarted after a death may
// listen on new ports (Jupyter picks new ones for a kernel that dies within its first
// seconds), which this WebSocket's server-side channels no longer reach. The owner
// connects again once the kernel is back.
func (c *Conn) kernelDied(state string) {
	c.fail(&KernelDiedError{State: state})
	c.closing.Store(true)
	c.wmu.Lock()
	ws := c.ws
	c.wmu.Unlock()
	_ = ws.Close()
}
