package jupyter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Reading: the one goroutine that reads the WebSocket, and the bounded read of one
// message.

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

// readBuffers pools the read loops' scratch buffers for small messages: one is read
// into a scratch buffer and copied out at its exact size. A message that outgrows
// the scratch buffer continues in a buffer of its own, grown by doubling and handed
// over as it is; large buffers are not pooled, because what a pool keeps counts
// as live memory (and Go's collector lets the heap grow to twice that).
var readBuffers sync.Pool

const readBufferSize = 64 << 10

// readLimited reads r to its end, keeping at most max bytes, and returns the total
// length read.
func readLimited(r io.Reader, max int) ([]byte, int64, error) {
	bp, _ := readBuffers.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, readBufferSize)
		bp = &b
	}
	defer readBuffers.Put(bp)
	buf := (*bp)[:0]
	own := false // buf is not the scratch buffer
	for {
		room := min(cap(buf), max)
		if len(buf) == room {
			if len(buf) >= max {
				n, err := io.Copy(io.Discard, r)
				if !own {
					buf = bytes.Clone(buf)
				}
				return buf, int64(len(buf)) + n, err
			}
			nb := make([]byte, len(buf), min(2*cap(buf), max))
			copy(nb, buf)
			buf, own = nb, true
			room = cap(buf)
		}
		n, err := r.Read(buf[len(buf):room])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if !own {
				buf = bytes.Clone(buf)
			}
			return buf, int64(len(buf)), nil
		}
		if err != nil {
			return nil, 0, err
		}
	}
}

func (c *Conn) extendDeadline(ws *websocket.Conn) error {
	return ws.SetReadDeadline(time.Now().Add(3 * c.opts.PingInterval))
}
