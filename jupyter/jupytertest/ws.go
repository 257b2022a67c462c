package jupytertest

import (
	"net/http"
	"time"

	"github.com/gorilla/websocket"
	"github.com/kernelbox/kernelbox/jupyter"
)

// writeTimeout bounds one frame write, so a client that stopped reading loses
// messages instead of wedging the kernel.
const writeTimeout = 10 * time.Second

// wsConn is one client WebSocket of a kernel.
type wsConn struct {
	ws      *websocket.Conn
	v1      bool
	session string
}

// channels serves GET /api/kernels/{id}/channels: it upgrades, selecting v1 when the
// client offers it (unless Options.LegacyOnly), then reads client messages and hands
// them to the kernel's handler until the connection ends.
func (s *Server) channels(w http.ResponseWriter, r *http.Request, k *Kernel) {
	if stall := k.stalled(); stall != nil {
		select {
		case <-stall:
		case <-r.Context().Done():
			return
		}
	}
	if code := k.refusal(); code != 0 {
		writeError(w, code, "refused by the test script")
		return
	}
	if !s.track() {
		writeError(w, http.StatusServiceUnavailable, "server is closing")
		return
	}
	defer s.wg.Done()
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	if !s.opts.LegacyOnly {
		up.Subprotocols = []string{jupyter.SubprotocolV1}
	}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade has answered the request
	}
	c := &wsConn{ws: ws, v1: ws.Subprotocol() == jupyter.SubprotocolV1, session: r.URL.Query().Get("session_id")}
	if !k.attach(c) {
		c.abort()
		return
	}
	defer k.detach(c)
	defer ws.Close()
	for {
		frameType, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		m, err := decodeFrame(frameType, data, c.v1)
		if err != nil {
			k.mu.Lock()
			k.malformed++
			k.mu.Unlock()
			continue
		}
		k.handle(m)
	}
}

// write sends one message in the connection's framing. Callers hold the kernel's
// sendMu.
func (c *wsConn) write(m *jupyter.Message) error {
	frameType, data, err := encodeFrame(m, c.v1)
	if err != nil {
		return err
	}
	return c.writeRaw(frameType, data)
}

func (c *wsConn) writeRaw(frameType int, data []byte) error {
	_ = c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
	return c.ws.WriteMessage(frameType, data)
}

// abort closes the TCP connection without a close frame.
func (c *wsConn) abort() { _ = c.ws.NetConn().Close() }
