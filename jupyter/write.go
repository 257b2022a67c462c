package jupyter

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Writing: messages and pings, serialized by the write lock.

// writeBuffers pools the connections' write buffers (gorilla/websocket holds one only
// while a message is being written). It is shared by every connection of the process,
// like any allocator cache; it holds no state of its own.
var writeBuffers = &sync.Pool{}

const writeBufferSize = 1 << 20

// send writes one message.
func (c *Conn) send(ctx context.Context, m *Message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	frame := websocket.TextMessage
	if c.proto == ProtocolV1 {
		frame = websocket.BinaryMessage
	}
	head, tail, err := frameParts(m, c.proto)
	if err != nil {
		return fmt.Errorf("encode %s: %w", m.Header.MsgType, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.ws.SetWriteDeadline(deadline)
	if err := c.write(frame, head, m, tail); err != nil {
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

// write writes one message's frame, its content straight from m (no frame is
// assembled first: a message larger than the write buffer goes out as several
// WebSocket fragments).
func (c *Conn) write(frame int, head []byte, m *Message, tail []byte) error {
	w, err := c.ws.NextWriter(frame)
	if err != nil {
		return err
	}
	if _, err = w.Write(head); err == nil {
		if err = m.writeContent(w); err == nil {
			_, err = w.Write(tail)
		}
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
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
