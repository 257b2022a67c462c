package jupyter

import (
	"errors"
	"net"
	"time"

	"github.com/gorilla/websocket"
)

// Closing: Close by the owner, and the terminal failures (a lost connection, a
// dead kernel) that stop the connection for good.

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
