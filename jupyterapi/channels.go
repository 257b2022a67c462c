package jupyterapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/kernelbox/kernelbox/audit"
	"github.com/kernelbox/kernelbox/internal/origin"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/tokens"
)

// WebSocket close codes the API sends.
const (
	closeNormal      = websocket.CloseNormalClosure
	closeGoingAway   = websocket.CloseGoingAway
	closeUnsupported = websocket.CloseUnsupportedData
	closeInvalid     = websocket.CloseInvalidFramePayloadData
	closePolicy      = websocket.ClosePolicyViolation
)

// client is one WebSocket to a kernel. The handler's goroutine owns it and
// reads; one writer goroutine drains its bounded queue; drop ends both.
type client struct {
	g  *Gateway
	k  *kernel
	ws *websocket.Conn

	proto protocol // the connection's framing, chosen at the upgrade

	out    chan []byte  // frames to write, at most Options.ClientQueue
	queued atomic.Int64 // bytes in out

	quit   chan struct{} // closed by drop
	once   sync.Once
	code   int    // the close code, set by drop before quit is closed
	reason string // and its reason

	inflight chan struct{} // a slot per request running, Options.MaxInFlight
	done     chan struct{} // closed when the writer has exited

	watchOnly bool // its scoped token may not run code (no "execute" op)
}

// channels upgrades GET /api/kernels/{id}/channels: to the binary
// v1.kernel.websocket.jupyter.org subprotocol when the client offers it, else
// to the legacy JSON protocol (wire.go). The guard has checked the token and
// the Host; a browser's Origin must be this server's too (DNS rebinding or a
// foreign page through the upgrade).
func (g *Gateway) channels(w http.ResponseWriter, r *http.Request) {
	k, _, ok := g.lookupHTTP(w, r.PathValue("id"))
	if !ok {
		return
	}
	up := websocket.Upgrader{CheckOrigin: origin.Same, ReadBufferSize: 16 << 10, WriteBufferSize: 16 << 10,
		Subprotocols: []string{jupyter.SubprotocolV1}}
	up.Error = func(w http.ResponseWriter, r *http.Request, status int, reason error) {
		writeError(w, status, "websocket: "+reason.Error())
	}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	c := &client{
		g: g, k: k, ws: ws, proto: protocolOf(ws.Subprotocol()),
		out:      make(chan []byte, g.o.ClientQueue),
		quit:     make(chan struct{}),
		inflight: make(chan struct{}, g.o.MaxInFlight),
		done:     make(chan struct{}),
	}
	p := tokens.FromContext(r.Context())
	c.watchOnly = !p.Allows(tokens.OpExecute)
	// A revoked token's connections end at once, saying why (the guard ends
	// the request's context with the revocation as its cause).
	stop := context.AfterFunc(r.Context(), func() {
		if cause := context.Cause(r.Context()); cause != nil && p.Revoked().Err() != nil {
			g.o.Audit.Write(audit.Record{Interface: "jupyter", TokenID: p.ID(), TokenName: p.Name(), Route: "GET /api/kernels/{id}/channels",
				Session: k.id, Outcome: "refused", Reason: cause.Error()})
			c.drop(closePolicy, cause.Error())
		}
	})
	defer stop()
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		c.drop(closeGoingAway, "the server is shutting down")
	}
	if err := k.attach(g, c); err != nil {
		c.drop(closeGoingAway, "the kernel's session is gone: "+err.Error())
	} else {
		g.connected(c, 1)
		defer g.connected(c, -1)
	}
	go c.writeLoop()
	c.readLoop()
	k.detach(c)
	c.drop(closeNormal, "")
	<-c.done
}

// readLoop reads the client's frames until the connection ends.
func (c *client) readLoop() {
	c.ws.SetReadLimit(c.g.o.MaxFrameBytes)
	for {
		typ, data, err := c.ws.ReadMessage()
		if errors.Is(err, websocket.ErrReadLimit) {
			// The library has sent 1009 itself.
			c.dropFor(DropTooBig, websocket.CloseMessageTooBig, "frame over the size limit")
			return
		}
		if err != nil {
			return
		}
		m, code, err := c.proto.decode(typ, data)
		if err != nil {
			c.drop(code, err.Error())
			return
		}
		c.g.stats.in.Add(1)
		c.handle(m)
	}
}

// writeLoop writes the queued frames until drop.
func (c *client) writeLoop() {
	defer close(c.done)
	defer c.ws.Close()
	for {
		select {
		case f := <-c.out:
			c.queued.Add(-int64(len(f)))
			if err := c.write(f); err != nil {
				// A write that timed out is the client's fault; any other
				// failure is a peer that went away (counted as no drop).
				cause, ne := DropCause(-1), net.Error(nil)
				if errors.As(err, &ne) && ne.Timeout() {
					cause = DropWriteTimeout
				}
				c.dropFor(cause, closeGoingAway, "write failed")
				return
			}
		case <-c.quit:
			if c.code == closeNormal || c.code == closeGoingAway {
				c.flush() // what was queued before an orderly close (a last reply)
			}
			msg := websocket.FormatCloseMessage(c.code, clipReason(c.reason))
			_ = c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
			return
		}
	}
}

// flush writes the frames queued now, each within WriteTimeout, and stops at
// the first that fails.
func (c *client) flush() {
	for {
		select {
		case f := <-c.out:
			c.queued.Add(-int64(len(f)))
			if c.write(f) != nil {
				return
			}
		default:
			return
		}
	}
}

// write writes one frame within WriteTimeout.
func (c *client) write(f []byte) error {
	_ = c.ws.SetWriteDeadline(time.Now().Add(c.g.o.WriteTimeout))
	if err := c.ws.WriteMessage(c.proto.frameType(), f); err != nil {
		return err
	}
	c.g.stats.out.Add(1)
	return nil
}

// queue queues a message for the client, in its protocol, without blocking. A
// client that has not read Options.ClientQueue frames or ClientQueueBytes is
// dropped, with the reason as its close reason: it must not hold up the kernel
// or other clients.
func (c *client) queue(m *outFrame) {
	select {
	case <-c.quit:
		return
	default:
	}
	f := m.bytes(c.proto)
	if n := c.queued.Add(int64(len(f))); n > c.g.o.ClientQueueBytes {
		c.queued.Add(-int64(len(f)))
		c.drop(closePolicy, "client too slow: over the queue's byte limit unread")
		return
	}
	select {
	case c.out <- f:
	default:
		c.queued.Add(-int64(len(f)))
		c.drop(closePolicy, "client too slow: over the queue's message limit unread")
	}
}

// drop ends the connection with a close code and reason (the first drop's).
// A code that says the client misbehaved counts as a drop in Stats.
func (c *client) drop(code int, reason string) {
	cause := DropCause(-1)
	switch code {
	case closePolicy:
		cause = DropTooSlow
	case closeInvalid:
		cause = DropMalformed
	case closeUnsupported:
		cause = DropUnsupported
	}
	c.dropFor(cause, code, reason)
}

// dropFor is drop counting cause (-1: none).
func (c *client) dropFor(cause DropCause, code int, reason string) {
	c.once.Do(func() {
		if cause >= 0 {
			c.g.stats.dropped[cause].Add(1)
		}
		c.code, c.reason = code, reason
		if code != closeNormal && code != closeGoingAway {
			c.g.log.Info("gateway client dropped", "kernel_id", c.k.id, "code", code, "reason", reason)
		}
		close(c.quit)
	})
}

// clipReason fits a close reason in a control frame (123 bytes).
func clipReason(s string) string {
	if len(s) <= 120 {
		return s
	}
	return strings.ToValidUTF8(s[:120], "")
}
