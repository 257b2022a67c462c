package jupyter

import (
	"net"
	"syscall"
)

// quickAckConn re-arms TCP_QUICKACK before every read. Linux clears the flag after it
// has sent an ACK, so one setsockopt at dial time is not enough.
type quickAckConn struct {
	*net.TCPConn
	raw syscall.RawConn
}

func newQuickAckConn(c *net.TCPConn) net.Conn {
	raw, err := c.SyscallConn()
	if err != nil {
		return c
	}
	return &quickAckConn{TCPConn: c, raw: raw}
}

func (c *quickAckConn) Read(p []byte) (int, error) {
	_ = c.raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	})
	return c.TCPConn.Read(p)
}
