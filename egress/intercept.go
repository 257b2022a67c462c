package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Intercept is what a proxy needs to add secrets (Options.Intercept): the CA
// whose certificates the kernel is handed for the hosts with a secret rule,
// and the roots with which the proxy verifies those hosts. One Intercept
// serves every session of a server; it is safe for concurrent use.
type Intercept struct {
	// CA signs the certificates the kernel sees for intercepted hosts; required.
	CA *CA
	// UpstreamRoots verify the real hosts' certificates. Defaults to the
	// system's roots (a test internet gives its own CA here).
	UpstreamRoots *x509.CertPool
}

// Bounds of an intercepted connection.
const (
	// maxInterceptHead bounds one request or response head inside TLS.
	maxInterceptHead = 64 << 10
	// readAhead is the read buffer below each side's TLS: one system call
	// takes what has arrived, many records, rather than one record.
	readAhead = 64 << 10
	// maxUsesPerConn bounds the secret uses a connection's record lists.
	maxUsesPerConn = 20
)

// intercepts says whether a CONNECT to host:port is one the proxy terminates:
// a rule of the session's secrets names it.
func (p *Proxy) intercepts(host Host, port int) bool {
	return p.o.Rules.secrets.applies(host, port, true)
}

// intercept answers a CONNECT to a host with a secret rule: it terminates the
// kernel's TLS with a certificate for host from the CA, opens TLS to the real
// host (verified), and carries HTTP/1.1 requests one at a time, each checked
// (server name and Host are the CONNECT's host) and given the secret when a
// rule's host and path match. Bodies stream both ways, unbuffered.
func (p *Proxy) intercept(c net.Conn, br *bufio.Reader, up net.Conn, host Host, port int, rec *Record) {
	ic := p.o.Intercept
	if ic == nil || ic.CA == nil {
		rec.Decision = deny("secrets", fmt.Sprintf("%s has a secret rule, and this proxy cannot add secrets (no CA)", host))
		refuse(c, rec.Decision)
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		rec.Err = err.Error()
		return
	}
	s := &session{p: p, host: host, port: port, rec: rec}
	defer func() { rec.Up, rec.Down = s.up.Load(), s.down.Load() }()
	kb := &batchWriter{w: &atomicCounter{w: c, p: p, n: &s.down}}
	ka := &aheadReader{br: bufio.NewReaderSize(br, readAhead)}
	tc := tls.Server(&countConn{Conn: c, r: ka, w: kb}, &tls.Config{
		MinVersion: tls.VersionTLS12,
		// HTTP/1.1 only: a client offering only h2 fails the handshake
		// (no_application_protocol), one offering both gets http/1.1.
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if hi.ServerName != "" {
				if sn, err := ParseHost(hi.ServerName); err != nil || sn != host {
					return nil, &nameMismatch{name: hi.ServerName}
				}
			}
			return ic.CA.leaf(host.Name)
		},
	})
	defer tc.Close()
	c.SetDeadline(time.Now().Add(p.o.HeadTimeout))
	if err := tc.Handshake(); err != nil {
		var nm *nameMismatch
		if errors.As(err, &nm) {
			rec.Decision = deny("server name mismatch", fmt.Sprintf("the TLS server name %q is not the CONNECT target %s", clip(nm.name), host))
		} else {
			// The usual cause: a client that does not trust the CA (one that
			// ignores SSL_CERT_FILE and the like, or pins its own roots).
			rec.Err = "TLS from the kernel: " + err.Error() + " (this host's secret needs the client to trust kernelbox's CA, in the bundle SSL_CERT_FILE names)"
		}
		return
	}
	ub := &batchWriter{w: &atomicCounter{w: up, p: p, n: &s.up}}
	ua := &aheadReader{br: bufio.NewReaderSize(up, readAhead)}
	uc := tls.Client(&countConn{Conn: up, r: ua, w: ub}, &tls.Config{
		MinVersion: tls.VersionTLS12, ServerName: host.Name, RootCAs: ic.UpstreamRoots,
		NextProtos: []string{"http/1.1"},
	})
	defer uc.Close()
	up.SetDeadline(time.Now().Add(p.o.DialTimeout))
	if err := uc.Handshake(); err != nil {
		rec.Err = "TLS to " + host.String() + ": " + err.Error()
		answer(tc, http502, "kernelbox egress proxy: TLS to "+host.String()+" failed: "+err.Error())
		return
	}
	c.SetDeadline(time.Time{})
	up.SetDeadline(time.Time{})
	s.kernel, s.server = tc, uc
	s.kw, s.sw = newAsyncWriter(tc, kb), newAsyncWriter(uc, ub)
	// Cut both connections first when the loop ends, so that neither writer
	// waits on a peer that stopped reading.
	defer s.sw.Close()
	defer s.kw.Close()
	defer up.Close()
	defer c.Close()
	s.kl = &headLimit{r: &idleReader{r: tc, conn: c, idle: p.o.IdleTimeout, ahead: ka}, n: -1}
	s.sl = &headLimit{r: &idleReader{r: uc, conn: up, idle: p.o.IdleTimeout, ahead: ua}, n: -1}
	s.kr, s.sr = bufio.NewReaderSize(s.kl, 64<<10), bufio.NewReaderSize(s.sl, 64<<10)
	s.loop()
}

// nameMismatch is a ClientHello whose server name is not the CONNECT's host.
type nameMismatch struct{ name string }

func (e *nameMismatch) Error() string {
	return "server name " + strconv.Quote(e.name) + " is not the CONNECT's host"
}

// session is one intercepted connection: the kernel's side and the host's.
type session struct {
	p        *Proxy
	host     Host
	port     int
	kernel   *tls.Conn
	server   *tls.Conn
	kl, sl   *headLimit // bound the heads read through kr and sr
	kr, sr   *bufio.Reader
	kw, sw   *asyncWriter // to the kernel, to the host
	up, down atomic.Int64 // bytes written to the host and to the kernel
	rec      *Record
	uses     int
}

// loop carries requests until either side ends or one is refused.
func (s *session) loop() {
	for {
		req, err := s.readRequest()
		if err != nil {
			return
		}
		if !s.exchange(req) {
			return
		}
	}
}

// readRequest reads the kernel's next request head, bounded in size; it
// answers (and returns an error for) one that cannot be read.
func (s *session) readRequest() (*http.Request, error) {
	// What the reader holds already counts against the bound: at most its
	// size more than maxInterceptHead is read before the head must end.
	s.kl.n, s.kl.hit = maxInterceptHead, false
	req, err := http.ReadRequest(s.kr)
	s.kl.n = -1
	switch {
	case s.kl.hit:
		s.refuse(deny("request smuggling or bounds", fmt.Sprintf("inside TLS: a request head over %d bytes", maxInterceptHead)))
		return nil, errHeadBound
	case err != nil && !errors.Is(err, io.EOF) && !isClosed(err):
		s.refuse(deny("request smuggling or bounds", "inside TLS: "+err.Error()))
	}
	return req, err
}

var errHeadBound = errors.New("head bound")

// isClosed says whether err is a connection's end rather than a bad request.
func isClosed(err error) bool {
	var ne net.Error
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) || (errors.As(err, &ne) && ne.Timeout())
}

// refuse answers the kernel with a 403 naming the rule, inside TLS, and marks
// the connection's record.
func (s *session) refuse(d Decision) {
	s.rec.Decision = d
	s.kw.Flush()
	answer(s.kernel, "403 Forbidden", "kernelbox egress proxy: refused by rule ["+d.Rule+"]: "+d.Reason)
}

// answer writes a short plain-text response that closes the connection.
func answer(w net.Conn, status, body string) {
	body += "\n"
	w.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(w, "HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\nX-Kernelbox-Egress: refused\r\n\r\n%s", status, len(body), body)
}

// exchange checks one request, adds the secret where a rule says, sends it on
// and carries the response back. It returns false when the connection ends.
func (s *session) exchange(req *http.Request) bool {
	rule, d, ok := s.check(req)
	if !ok {
		if req.Body != nil {
			req.Body.Close()
		}
		s.refuse(d)
		return false
	}
	use := SecretUse{Method: req.Method, Path: clip(req.URL.EscapedPath())}
	if rule != nil {
		use.Rule = rule.Name
		if err := rule.apply(req); err != nil {
			s.refuse(deny("secret "+rule.Name, err.Error()))
			return false
		}
	}
	// The connection's counts, not rec's, which are set when it ends.
	upBefore, downBefore := s.up.Load(), s.down.Load()
	status, keep := s.roundTrip(req)
	if rule != nil {
		use.Status = status
		use.Up, use.Down = s.up.Load()-upBefore, s.down.Load()-downBefore
		s.used(use)
	}
	return keep
}

// used records one request that carried a secret.
func (s *session) used(u SecretUse) {
	s.p.log.Info("egress secret used", "session", s.p.o.Session, "rule", u.Rule, "host", s.host.String(),
		"method", u.Method, "path", u.Path, "status", u.Status, "up", u.Up, "down", u.Down)
	s.uses++
	if s.uses > maxUsesPerConn {
		s.rec.MoreSecretUses++
		return
	}
	s.rec.SecretUses = append(s.rec.SecretUses, u)
}

// roundTrip sends req to the host while reading its answer, and carries the
// answer (interim 1xx answers, then the final one, or a protocol switch) back
// to the kernel. It returns the final status and whether another request may
// follow on the connection. It returns only once the request's writer has.
func (s *session) roundTrip(req *http.Request) (int, bool) {
	sw, kw := s.sw, s.kw
	sent := make(chan error, 1)
	go func() {
		err := req.Write(sw)
		if err == nil {
			err = sw.Flush()
		}
		sent <- err
	}()
	for {
		s.sl.n, s.sl.hit = maxInterceptHead, false
		resp, err := http.ReadResponse(s.sr, req)
		s.sl.n = -1
		if err != nil {
			if s.sl.hit {
				err = fmt.Errorf("a response head over %d bytes", maxInterceptHead)
			}
			s.rec.Err = "response from " + s.host.String() + ": " + err.Error()
			s.kw.Flush()
			answer(s.kernel, http502, "kernelbox egress proxy: "+s.rec.Err)
			s.abort(sent)
			return http.StatusBadGateway, false
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return resp.StatusCode, s.switchProtocols(resp, kw, sent)
		case resp.StatusCode >= 200:
			return resp.StatusCode, s.respond(resp, kw, sent)
		}
		if err := resp.Write(kw); err != nil || kw.Flush() != nil {
			s.abort(sent)
			return resp.StatusCode, false
		}
	}
}

// abort cuts both sides, which ends the request's writer, and waits for it.
func (s *session) abort(sent chan error) {
	s.server.NetConn().Close()
	s.kernel.NetConn().Close()
	s.failed(<-sent)
}

// failed notes how a request's writer failed, if it did.
func (s *session) failed(err error) {
	switch {
	case err == nil:
	case errors.Is(err, errByteLimit):
		s.rec.Decision = deny("byte limit", fmt.Sprintf("the session passed its %d bytes (max_bytes); the connection was cut", s.p.o.Rules.policy.MaxBytes))
	case s.rec.Err == "" && !isClosed(err):
		s.rec.Err = "request to " + s.host.String() + ": " + err.Error()
	}
}

// respond carries a final response back; it waits for the request's body to
// have gone out before the connection takes another request.
func (s *session) respond(resp *http.Response, kw *asyncWriter, sent chan error) bool {
	err := resp.Write(kw)
	if err == nil {
		err = kw.Flush()
	}
	resp.Body.Close()
	if err != nil {
		if errors.Is(err, errByteLimit) {
			s.failed(err)
		} else if s.rec.Err == "" && !isClosed(err) {
			s.rec.Err = "response to the kernel: " + err.Error()
		}
		s.abort(sent)
		return false
	}
	if werr := <-sent; werr != nil {
		s.failed(werr)
		return false
	}
	return !resp.Close
}

// switchProtocols carries a 101 answer (a WebSocket upgrade) and then bytes
// both ways, untouched, until both directions end.
func (s *session) switchProtocols(resp *http.Response, kw *asyncWriter, sent chan error) bool {
	if err := <-sent; err != nil {
		s.failed(err)
		return false
	}
	resp.Body = nil
	if err := resp.Write(kw); err != nil || kw.Flush() != nil {
		return false
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(s.server, s.kr)
		s.server.CloseWrite()
	}()
	io.Copy(s.kernel, s.sr)
	s.kernel.CloseWrite()
	wg.Wait()
	return false
}
