package main

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type fakeNets netip.Addr

func (f fakeNets) SessionNetwork(a netip.Addr) bool { return a == netip.Addr(f) }

// A connection that arrives on a session network's address is closed before
// anything is read; one on another address is served.
func TestSessionNetGuard(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	require.NoError(t, err)
	g := sessionNetGuard{Listener: ln, nets: fakeNets(netip.MustParseAddr("127.0.0.2")), log: slog.New(slog.DiscardHandler)}
	defer g.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	served := make(chan string, 2)
	go func() {
		for {
			c, err := g.Accept()
			if err != nil {
				return
			}
			served <- c.LocalAddr().String()
			_, _ = c.Write([]byte("hello"))
			_ = c.Close()
		}
	}()
	read := func(host string) string {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), 5*time.Second)
		require.NoError(t, err)
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, _ := io.ReadAll(c)
		return string(b)
	}
	require.Empty(t, read("127.0.0.2"), "closed unread")
	require.Equal(t, "hello", read("127.0.0.1"))
	require.Contains(t, <-served, "127.0.0.1:")
	select {
	case a := <-served:
		t.Fatalf("a session network's connection was served on %s", a)
	default:
	}
}
