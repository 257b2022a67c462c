package jupyter

import (
	"context"
	"log/slog"
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

	unclaimed atomic.Pointer[func(*Message)] // see SetUnclaimed

	strayMsgs  atomic.Int64 // output messages for calls already ended (see TakeStray)
	strayBytes atomic.Int64

	closing   atomic.Bool // set by Close and on kernel death: a read error is not a drop
	closeOnce sync.Once
	stop      chan struct{} // closed by Close
	done      chan struct{} // closed when the reader exits
	wg        sync.WaitGroup
}

// withDefaults returns o with its zero fields set to their documented defaults;
// the logger defaults to the client's, log.
func (o ConnOptions) withDefaults(log *slog.Logger) ConnOptions {
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
		o.Logger = log
	}
	return o
}

// Connect opens a WebSocket to the kernel's channels.
func (c *Client) Connect(ctx context.Context, kernelID string, opts *ConnOptions) (*Conn, error) {
	var o ConnOptions
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults(c.log)
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
