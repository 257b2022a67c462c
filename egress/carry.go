package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

const http502 = "502 Bad Gateway"

// refuse answers a denied request: a 403 whose plain-text body names the rule.
func refuse(c net.Conn, d Decision) {
	fail(c, "403 Forbidden", "kernelbox egress proxy: refused by rule ["+d.Rule+"]: "+d.Reason)
}

// fail writes a short plain-text response and leaves the connection to be closed.
func fail(c net.Conn, status, body string) {
	body += "\n"
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\nX-Kernelbox-Egress: refused\r\n\r\n%s", status, len(body), body)
}

// resolve returns a name's addresses (an IP literal's own).
func (p *Proxy) resolve(ctx context.Context, h Host) ([]netip.Addr, error) {
	if h.Literal {
		return []netip.Addr{h.Addr}, nil
	}
	if p.o.TestHosts != nil {
		as, ok := p.o.TestHosts[h.Name]
		if !ok {
			return nil, fmt.Errorf("resolve %s: no such host", h.Name)
		}
		return as, nil
	}
	as, err := p.o.Resolver.LookupNetIP(ctx, "ip", h.Name)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", h.Name, err)
	}
	return as, nil
}

// dial resolves host, checks every address and dials the allowed ones in turn:
// the address dialled is the address checked. It returns a nil conn and a Deny
// when no address is allowed, or a nil conn, an Allow and the error when none
// answered.
func (p *Proxy) dial(host Host, port int, rec *Record) (net.Conn, Decision, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.o.DialTimeout)
	defer cancel()
	as, err := p.resolve(ctx, host)
	if err != nil {
		return nil, Decision{Effect: Allow, Rule: "resolve"}, err
	}
	var first Decision
	var lastErr error
	d := net.Dialer{}
	for _, a := range as {
		ad := p.o.Rules.CheckAddr(a)
		if ad.Effect == Deny {
			if first.Rule == "" {
				first = ad
				first.Reason = fmt.Sprintf("%s resolves to %s: %s", host, a, ad.Reason)
			}
			continue
		}
		ap := netip.AddrPortFrom(a.Unmap(), uint16(port))
		rec.Addr = ap
		c, err := d.DialContext(ctx, "tcp", ap.String())
		if err == nil {
			return c, ad, nil
		}
		lastErr = err
	}
	if lastErr == nil {
		if first.Rule == "" {
			return nil, Decision{Effect: Allow, Rule: "resolve"}, fmt.Errorf("resolve %s: no addresses", host)
		}
		return nil, first, nil
	}
	return nil, Decision{Effect: Allow, Rule: "dial"}, fmt.Errorf("dial %s: %w", rec.Addr, lastErr)
}

// tunnel answers a CONNECT, checks the ClientHello's server name if the client
// speaks TLS, and carries bytes both ways untouched.
func (p *Proxy) tunnel(c net.Conn, br *bufio.Reader, up net.Conn, host Host, rec *Record) {
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		rec.Err = err.Error()
		return
	}
	first, ok := p.judgeTunnel(c, br, host, rec)
	if !ok {
		return
	}
	c.SetReadDeadline(time.Time{})
	p.splice(c, io.MultiReader(bytes.NewReader(first), bufferedOf(br), c), up, rec)
}

// judgeTunnel reads what the client sends first in a CONNECT tunnel, before a
// byte goes on: a TLS ClientHello, gathered whole from however many records
// carry it, must name the CONNECT target (or no name); plain HTTP is refused
// (its Host, and every later request's on the same connection, would go
// unchecked: plain HTTP goes to the proxy as an absolute URI, one checked
// request per connection); a client that sends nothing within SniffTimeout
// speaks a server-first protocol and is passed on. It returns the bytes it
// consumed, to be sent first, and false when rec holds the refusal (or error).
func (p *Proxy) judgeTunnel(c net.Conn, br *bufio.Reader, host Host, rec *Record) ([]byte, bool) {
	c.SetReadDeadline(time.Now().Add(p.o.SniffTimeout))
	b, err := br.Peek(1)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return nil, true
	case err != nil:
		rec.Err = err.Error()
		return nil, false
	}
	c.SetReadDeadline(time.Now().Add(p.o.HeadTimeout))
	if b[0] != 0x16 {
		isHTTP, err := looksLikeHTTP(br)
		switch {
		case isHTTP:
			rec.Decision = deny("plain HTTP in a tunnel", "plain HTTP through CONNECT is refused (its Host is not checked); send http:// URLs to the proxy as they are")
		case err != nil && !errors.Is(err, io.EOF):
			rec.Decision = deny("request smuggling or bounds", "the tunnel's first bytes were neither whole nor TLS nor a protocol the proxy passes: "+err.Error())
		default:
			return nil, true
		}
		return nil, false
	}
	raw, name, err := readClientHello(br)
	if err != nil {
		rec.Decision = deny("request smuggling or bounds", "the tunnel's TLS ClientHello: "+err.Error())
		return nil, false
	}
	if name != "" {
		sn, perr := ParseHost(name)
		if perr != nil || sn != host {
			rec.Decision = deny("server name mismatch", fmt.Sprintf("the TLS server name %q is not the CONNECT target %s", clip(name), host))
			return nil, false
		}
	}
	return raw, true
}

// bufferedOf returns the bytes br already holds, as a reader.
func bufferedOf(br *bufio.Reader) io.Reader {
	b, _ := br.Peek(br.Buffered())
	return bytes.NewReader(append([]byte(nil), b...))
}

// forward sends one plain-HTTP request on to the server in origin form, with
// Connection: close, then carries the response back; the client connection is
// closed after it, so every request is checked on a connection of its own.
func (p *Proxy) forward(c net.Conn, br *bufio.Reader, h *head, up net.Conn, rec *Record) {
	req, err := http.ReadRequest(bufio.NewReader(io.MultiReader(bytes.NewReader(h.raw), br)))
	if err != nil {
		rec.Err = "read request: " + err.Error()
		return
	}
	for _, k := range []string{"Proxy-Connection", "Proxy-Authorization", "Keep-Alive", "Connection", "Upgrade"} {
		req.Header.Del(k)
	}
	req.Close = true
	req.RequestURI = ""
	if !p.plainSecret(c, req, h, rec) {
		return
	}
	cw := &countWriter{w: up, p: p, n: &rec.Up}
	if err := req.Write(cw); err != nil {
		rec.Err = "write request: " + err.Error()
		return
	}
	p.copyIdle(&countWriter{w: c, p: p, n: &rec.Down}, up, rec)
	p.ending(c)
}

// splice carries bytes both ways until both directions end.
func (p *Proxy) splice(c net.Conn, from io.Reader, up net.Conn, rec *Record) {
	var wg sync.WaitGroup
	var upRec Record
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.copyIdleFrom(&countWriter{w: up, p: p, n: &upRec.Up}, from, c, &upRec)
		p.ending(c)
		closeWrite(up)
	}()
	p.copyIdle(&countWriter{w: c, p: p, n: &rec.Down}, up, rec)
	p.ending(c)
	closeWrite(c)
	wg.Wait()
	rec.Up += upRec.Up
	if rec.Err == "" {
		rec.Err = upRec.Err
	}
	if upRec.Decision.Effect == Deny && upRec.Decision.Rule != "" {
		rec.Decision = upRec.Decision
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// copyIdle copies from src until EOF, cutting it after IdleTimeout of silence.
func (p *Proxy) copyIdle(dst *countWriter, src net.Conn, rec *Record) {
	p.copyIdleFrom(dst, src, src, rec)
}

// copyBuf is the size of a copy buffer.
const copyBuf = 256 << 10

// copyIdleFrom copies from r (which reads conn) with conn's idle deadline.
// Its buffer comes from the proxy's pool: allocating and zeroing two fresh
// 256 KiB buffers cost each connection about 0.2 ms (docs/network.md).
func (p *Proxy) copyIdleFrom(dst *countWriter, r io.Reader, conn net.Conn, rec *Record) {
	bp, _ := p.bufs.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, copyBuf)
		bp = &b
	}
	defer p.bufs.Put(bp)
	buf := *bp
	for {
		conn.SetReadDeadline(time.Now().Add(p.o.IdleTimeout))
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				if errors.Is(werr, errByteLimit) {
					rec.Decision = deny("byte limit", fmt.Sprintf("the session passed its %d bytes (max_bytes, over the session's life); the connection was cut", p.o.Rules.policy.MaxBytes))
				} else {
					rec.Err = werr.Error()
				}
				return
			}
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				rec.Err = fmt.Sprintf("idle for %s; cut", p.o.IdleTimeout)
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				rec.Err = err.Error()
			}
			return
		}
	}
}

var errByteLimit = errors.New("byte limit")

// countWriter counts bytes into n and the proxy's session total, refusing a write
// that would pass the session's byte limit.
type countWriter struct {
	w io.Writer
	p *Proxy
	n *int64
}

func (cw *countWriter) Write(b []byte) (int, error) {
	if !cw.p.spend(int64(len(b))) {
		return 0, errByteLimit
	}
	n, err := cw.w.Write(b)
	*cw.n += int64(n)
	return n, err
}
