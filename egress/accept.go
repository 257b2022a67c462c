package egress

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// Accepting. A kernel may open connections to its proxy faster than anything
// else it does: each counts against the session's max_conns (and the shared
// Limiter) from the moment it is accepted, not once its request is read, and one
// past the bound is answered 403 at once and closed, so that idle connections
// cannot pile up in the server. When the server runs out of descriptors anyway
// (EMFILE, ENFILE) the loop backs off and retries rather than ending; the first
// failure of a run is logged, the run's count when it ends.

const (
	// acceptBackoffMin and acceptBackoffMax bound the wait after a failed accept.
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
	// lingerSlots bounds the refused connections whose unread request is
	// drained (so that the client reads the 403 rather than a reset) at once.
	lingerSlots = 16
	// lingerFor bounds that drain.
	lingerFor = 200 * time.Millisecond
)

// temporaryAccept says whether an accept error passes: the process or system is
// out of descriptors or memory, or the peer went away before it was accepted.
func temporaryAccept(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// acceptFailed counts a failed accept, logs the first of a run and waits
// (doubling from acceptBackoffMin to acceptBackoffMax), or returns false at once
// when the proxy closes meanwhile.
func (p *Proxy) acceptFailed(err error, wait *time.Duration, run *int64) bool {
	p.mu.Lock()
	p.st.AcceptErrors++
	p.mu.Unlock()
	if *run == 0 {
		p.log.Warn("egress accept failed; backing off", "session", p.session(), "err", err)
	}
	*run++
	*wait = min(max(*wait*2, acceptBackoffMin), acceptBackoffMax)
	select {
	case <-p.stop:
		return false
	case <-time.After(*wait):
		return true
	}
}

// acceptRecovered logs the end of a run of failed accepts.
func (p *Proxy) acceptRecovered(run int64) {
	p.log.Warn("egress accept recovered", "session", p.session(), "failed_accepts", run)
}

// admitConn holds c against the session's and the server's bounds; false when
// it was refused (answered, recorded and closed).
func (p *Proxy) admitConn(c net.Conn) bool {
	start := time.Now()
	d, ok := p.o.Limiter.take()
	if ok {
		p.mu.Lock()
		limit := min(p.o.Rules.policy.MaxConns, p.o.Limiter.perSession())
		if p.st.Active >= limit {
			d, ok = deny("connection limit", fmt.Sprintf("the session already has %d connections open; the limit is %d (max_conns, counted from each connection's accept)", p.st.Active, limit)), false
		}
		p.mu.Unlock()
		if !ok {
			p.o.Limiter.give()
		}
	}
	if ok {
		return true
	}
	refuse(c, d)
	p.linger(c)
	p.finish(Record{Session: p.session(), Start: start, Duration: time.Since(start), Decision: d})
	return false
}

// linger closes a refused connection, first draining briefly what the client
// sent (its request, usually) when a slot is free, so that it reads the 403
// instead of a reset.
func (p *Proxy) linger(c net.Conn) {
	select {
	case p.lingers <- struct{}{}:
	default:
		c.Close()
		return
	}
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		<-p.lingers
		c.Close()
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer func() { <-p.lingers; p.wg.Done() }()
		defer c.Close()
		closeWrite(c)
		c.SetReadDeadline(time.Now().Add(lingerFor))
		io.CopyN(io.Discard, c, 64<<10)
	}()
}
