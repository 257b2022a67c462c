package jupyter

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/gorilla/websocket"
)

// Dialling: the channels URL, the WebSocket handshake bounded by the caller's
// context, and the framing negotiation.

// dial opens the WebSocket, negotiating the framing.
func (c *Conn) dial(ctx context.Context) (*websocket.Conn, Protocol, error) {
	u := c.channelsURL()
	// gorilla/websocket bounds the handshake by ctx's deadline but does not watch
	// ctx for cancellation: a handshake the server holds open (Jupyter Server waits
	// for the kernel's kernel_info reply before it answers) would outlive a cancel.
	// A past deadline set on the socket when ctx ends unblocks it.
	var unwatch func() bool
	d := c.wsDialer(func(nc net.Conn) {
		unwatch = context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	})
	ws, resp, err := d.DialContext(ctx, u.String(), c.client.ep.authHeader())
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
	return c.negotiated(ws)
}

// channelsURL is the kernel's channels endpoint, for this connection's session.
func (c *Conn) channelsURL() url.URL {
	u := *c.client.base
	if u.Scheme == "https" {
		u.Scheme = "wss"
	} else {
		u.Scheme = "ws"
	}
	u.Path = c.client.base.Path + "/api/kernels/" + url.PathEscape(c.kernelID) + "/channels"
	u.RawQuery = url.Values{"session_id": {c.opts.SessionID}}.Encode()
	return u
}

// wsDialer is the WebSocket dialer for the client's endpoint, offering the
// framings the options allow; onSocket is called with each socket it opens.
func (c *Conn) wsDialer(onSocket func(net.Conn)) *websocket.Dialer {
	ep := c.client.ep
	base := ep.dialer()
	d := &websocket.Dialer{
		NetDialContext: func(dctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := base(dctx, network, addr)
			if err == nil {
				onSocket(nc)
			}
			return nc, err
		},
		TLSClientConfig:  ep.TLS,
		HandshakeTimeout: 30 * time.Second,
		ReadBufferSize:   64 << 10,
		// Large writes go out in few frames: Jupyter Server (tornado) joins the
		// frames of a fragmented message by repeated concatenation, which is
		// quadratic (a 4 MiB message in 16 KiB frames took seconds; in 1 MiB
		// frames it copies 10 MiB). What kernelbox sends is at most a few MiB
		// (code is capped at 1 MiB, file chunks are 1 MiB before base64). The
		// buffer is pooled, so an idle connection holds none.
		WriteBufferSize: writeBufferSize,
		WriteBufferPool: writeBuffers,
	}
	if c.opts.Protocol != ProtocolLegacy {
		d.Subprotocols = []string{SubprotocolV1}
	}
	return d
}

// negotiated returns the framing the server chose for ws, failing when it is not
// the one the options require, and arms ws's read deadline.
func (c *Conn) negotiated(ws *websocket.Conn) (*websocket.Conn, Protocol, error) {
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
