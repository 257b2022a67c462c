package main

import (
	"log/slog"
	"net"
	"net/netip"
)

// sessionNetworker is a backend on whose session networks kernelbox's own
// container has addresses (swarm): a TCP listener on all addresses would take
// connections from the sessions' kernels there.
type sessionNetworker interface {
	SessionNetwork(addr netip.Addr) bool
}

// sessionNetGuard closes, as soon as it is accepted, every connection that
// arrives on one of kernelbox's addresses on a session network: a kernel reaches
// kernelbox's API only through the client paths a person set up, never from its
// own network (the token would refuse it too; this refuses it before a byte of
// HTTP is read).
type sessionNetGuard struct {
	net.Listener
	nets sessionNetworker
	log  *slog.Logger
}

func (g sessionNetGuard) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ap, err := netip.ParseAddrPort(c.LocalAddr().String()); err == nil && g.nets.SessionNetwork(ap.Addr()) {
			g.log.Warn("refused a connection from a session's network", "local", c.LocalAddr().String(), "remote", c.RemoteAddr().String())
			_ = c.Close()
			continue
		}
		return c, nil
	}
}
