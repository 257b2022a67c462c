//go:build !linux

package jupyter

import "net"

// newQuickAckConn returns c unchanged: TCP_QUICKACK is Linux-only.
func newQuickAckConn(c *net.TCPConn) net.Conn { return c }
