package egress

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSettle: a connection whose client has closed its side, while the server
// takes a while to close its own, is waited for and recorded when Settle
// returns; one open both ways is waited for in its own period only (at most
// Settle's bound), not in the next.
func TestSettle(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64)
				for {
					if _, err := c.Read(buf); err != nil {
						time.Sleep(300 * time.Millisecond) // a slow close after the client's
						return
					}
				}
			}()
		}
	}()
	port := srv.Addr().(*net.TCPAddr).Port
	n := newTestNet(t, allowTest(true, func(p *Policy) { p.Allow = append(p.Allow, "other.test:"+strconv.Itoa(port)) }), nil)
	dial := func() *net.TCPConn {
		c, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT other.test:%d HTTP/1.1\r\nHost: other.test:%d\r\n\r\n", port, port)
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.Contains(line, " 200 ") {
			t.Fatalf("CONNECT: %q %v", line, err)
		}
		return c.(*net.TCPConn)
	}
	open := dial()
	defer open.Close()
	t0 := time.Now()
	n.proxy.Settle(200 * time.Millisecond)
	if d := time.Since(t0); d < 200*time.Millisecond {
		t.Fatalf("Settle returned after %s with a connection of its period open", d)
	}
	closing := dial()
	closing.Write([]byte("hello"))
	closing.CloseWrite()
	time.Sleep(50 * time.Millisecond) // the proxy sees the client's end
	t0 = time.Now()
	n.proxy.Settle(5 * time.Second)
	took := time.Since(t0)
	n.mu.Lock()
	recorded := len(n.records)
	n.mu.Unlock()
	if recorded != 1 {
		t.Fatalf("%d records after Settle (%s), want the closed connection's", recorded, took)
	}
	if took > 2*time.Second {
		t.Fatalf("Settle took %s: it waited for the earlier period's connection", took)
	}
	if st := n.proxy.Stats(); st.Active != 1 || st.Closing != 0 {
		t.Fatalf("stats %+v: want the open connection only", st)
	}
	t0 = time.Now()
	n.proxy.Settle(time.Second)
	if d := time.Since(t0); d > 100*time.Millisecond {
		t.Fatalf("Settle waited %s for an earlier period's connection open both ways", d)
	}
}
