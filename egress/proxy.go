package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// Options configure a Proxy. Only Rules is required; the other zero values mean
// the defaults given.
type Options struct {
	// Rules is the compiled policy the proxy enforces.
	Rules *Rules

	// Session names the session in records and logs; [Proxy.Adopt] renames it.
	Session string

	// Budget is what the session has spent of its byte limit (MaxBytes) over its
	// life, shared with the proxies that served it before. Defaults to a new
	// Budget: nothing spent.
	Budget *Budget

	// Limiter, when not nil, bounds this proxy's client connections together
	// with every other proxy's that shares it, and one proxy's to its
	// PerSession. Defaults to none: only the policy's MaxConns bounds them.
	Limiter *Limiter

	// TestHosts, when not nil, replaces name resolution: a name resolves to its
	// addresses here, and a name not here does not resolve. It is for tests
	// (a test internet made of network namespaces), so that they never touch the
	// machine's resolver; servers leave it nil.
	TestHosts map[string][]netip.Addr

	// Resolver resolves names when TestHosts is nil. Defaults to net.DefaultResolver.
	Resolver *net.Resolver

	// OnRecord is called once per client connection, when it ends, from the
	// connection's goroutine. Defaults to nothing.
	OnRecord func(Record)

	// Logger receives refusals (at most a few lines per session and 10 s, the
	// rest counted: refusals.go) and accept failures. Defaults to discarding.
	Logger *slog.Logger

	// MaxLineBytes bounds one request-head line. Defaults to 8 KiB.
	MaxLineBytes int
	// MaxHeadBytes bounds a whole request head. Defaults to 32 KiB.
	MaxHeadBytes int
	// HeadTimeout bounds reading a request head (slowloris). Defaults to 10 s.
	HeadTimeout time.Duration
	// IdleTimeout cuts a connection on which nothing moved either way for that
	// long. Defaults to 2 minutes.
	IdleTimeout time.Duration
	// DialTimeout bounds resolving and dialling. Defaults to 10 s.
	DialTimeout time.Duration
	// Intercept lets the proxy terminate TLS for the hosts with a secret rule
	// (Rules.WithSecrets) and add their secrets (intercept.go). Without it a
	// CONNECT to such a host is refused. Defaults to nil.
	Intercept *Intercept

	// SniffTimeout bounds the wait for a TLS ClientHello after CONNECT; a client
	// that sends nothing by then is a server-speaks-first protocol, passed on
	// unchecked. Defaults to 1 s.
	SniffTimeout time.Duration
}

// Proxy is one session's egress proxy. It is safe for concurrent use; Close stops
// it and waits for every connection's goroutine.
type Proxy struct {
	o    Options
	log  *slog.Logger
	stop chan struct{} // closed by Close: wakes an accept loop's backoff
	// lingers holds a slot per refused connection being drained (accept.go).
	lingers chan struct{}
	refused refusalLog
	mu      sync.Mutex
	sess    string                 // the session's id (Options.Session, then Adopt's); under mu
	budget  *Budget                // the session's; under mu
	conn    map[net.Conn]connState // client connections
	era     uint64                 // Settle's count: a connection accepted since the last Settle has this era
	ups     map[net.Conn]struct{}  // their connections to servers
	lns     map[net.Listener]struct{}
	st      Stats
	done    bool
	wg      sync.WaitGroup
	bufs    sync.Pool // copy buffers (*[]byte); see copyIdleFrom
}

// New returns a proxy enforcing o.Rules.
func New(o Options) (*Proxy, error) {
	if o.Rules == nil {
		return nil, errors.New("egress: no rules")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxLineBytes, 8<<10)
	def(&o.MaxHeadBytes, 32<<10)
	defd(&o.HeadTimeout, 10*time.Second)
	defd(&o.IdleTimeout, 2*time.Minute)
	defd(&o.DialTimeout, 10*time.Second)
	defd(&o.SniffTimeout, time.Second)
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Budget == nil {
		o.Budget = &Budget{}
	}
	return &Proxy{o: o, log: log, stop: make(chan struct{}), lingers: make(chan struct{}, lingerSlots),
		sess: o.Session, budget: o.Budget,
		conn: map[net.Conn]connState{}, ups: map[net.Conn]struct{}{}, lns: map[net.Listener]struct{}{}}, nil
}

// Adopt gives the proxy to session, spending from its budget from now on: a
// warm kernel's proxy, started before any session took it, then names the
// session in its records and logs, and counts the session's bytes with those
// its earlier proxies carried. A nil budget keeps the proxy's own.
func (p *Proxy) Adopt(session string, budget *Budget) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sess = session
	if budget != nil {
		p.budget = budget
	}
}

// session returns the session's id.
func (p *Proxy) session() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sess
}

// sessionBudget returns the session's budget.
func (p *Proxy) sessionBudget() *Budget {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.budget
}

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("egress: proxy closed")

// Serve accepts connections on ln until the proxy is closed, which closes ln, or
// ln fails for good; it survives running out of descriptors (accept.go) and
// logs why it ends unless closed. Each connection is served on its own
// goroutine, owned by the proxy.
func (p *Proxy) Serve(ln net.Listener) error {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	p.lns[ln] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.lns, ln)
		p.mu.Unlock()
	}()
	var wait time.Duration
	var run int64 // failed accepts in a row
	for {
		c, err := ln.Accept()
		if err != nil {
			p.mu.Lock()
			done := p.done
			p.mu.Unlock()
			if done {
				return ErrClosed
			}
			if temporaryAccept(err) {
				if p.acceptFailed(err, &wait, &run) {
					continue
				}
				return ErrClosed // closed during the back-off
			}
			if errors.Is(err, net.ErrClosed) && p.closed() {
				return ErrClosed
			}
			p.log.Error("egress proxy stopped accepting", "session", p.session(), "err", err)
			return err
		}
		if run > 0 {
			p.acceptRecovered(run)
			run, wait = 0, 0
		}
		if !p.admitConn(c) {
			continue
		}
		if !p.track(c) {
			c.Close()
			p.o.Limiter.give()
			return ErrClosed
		}
		go p.serveConn(c)
	}
}

// closed says whether Close was called.
func (p *Proxy) closed() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// track registers a connection; false when the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return false
	}
	p.conn[c] = connState{era: p.era}
	p.st.Active++
	p.wg.Add(1)
	return true
}

// trackUp registers a connection to a server, so that Close can cut it; false
// (and up closed) when the proxy is closed.
func (p *Proxy) trackUp(up net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		up.Close()
		return false
	}
	p.ups[up] = struct{}{}
	return true
}

// untrackUp closes and forgets a connection to a server.
func (p *Proxy) untrackUp(up net.Conn) {
	up.Close()
	p.mu.Lock()
	delete(p.ups, up)
	p.mu.Unlock()
}

// Close stops every listener and connection and waits for their goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.done {
		close(p.stop)
	}
	p.done = true
	for ln := range p.lns {
		ln.Close()
	}
	for c := range p.conn {
		c.Close()
	}
	for c := range p.ups {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	p.refused.flush(p.log, p.session())
	return nil
}

// connState is what Settle knows of a client connection.
type connState struct {
	era    uint64 // the Settle period it was accepted in
	ending bool   // one direction of it has ended: its record is moments away
}

// ending marks client connection c as closing (connState.ending).
func (p *Proxy) ending(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.conn[c]; ok && !st.ending {
		st.ending = true
		p.conn[c] = st
		p.st.Closing++
	}
}

// Settle waits, at most max, until the connections of the period that ends now
// are recorded — those accepted since the last Settle, and those one side of
// which has ended (code that closed a connection as its call ended: the last
// hops are still tearing it down) — then starts the next period. A connection
// from an earlier period still open both ways (a kept-alive pool's) is not
// waited for; one of this period that stays open costs its period max once.
func (p *Proxy) Settle(max time.Duration) {
	deadline := time.Now().Add(max)
	for p.unsettled() && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	p.mu.Lock()
	p.era++
	p.mu.Unlock()
}

// unsettled reports whether a connection Settle waits for is open.
func (p *Proxy) unsettled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range p.conn {
		if st.ending || st.era == p.era {
			return true
		}
	}
	return false
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st
}

// serveConn serves one client connection and records it.
func (p *Proxy) serveConn(c net.Conn) {
	rec := Record{Start: time.Now()}
	defer func() {
		c.Close()
		p.o.Limiter.give()
		rec.Duration = time.Since(rec.Start)
		p.mu.Lock()
		if p.conn[c].ending {
			p.st.Closing--
		}
		delete(p.conn, c)
		p.st.Active--
		rec.Session = p.sess
		p.mu.Unlock()
		p.finish(rec)
		p.wg.Done()
	}()
	p.serve(c, &rec)
}

// finish counts an ended connection's record, logs a refusal (bounded:
// refusals.go) and hands the record on.
func (p *Proxy) finish(rec Record) {
	p.mu.Lock()
	p.st.Connections++
	if rec.Decision.Effect == Deny {
		p.st.Refused++
	}
	p.st.Up += rec.Up
	p.st.Down += rec.Down
	p.mu.Unlock()
	if rec.Decision.Effect == Deny {
		p.refused.note(p.log, rec)
	}
	if p.o.OnRecord != nil {
		p.o.OnRecord(rec)
	}
}

// serve reads the request, decides, dials and carries bytes, filling rec.
func (p *Proxy) serve(c net.Conn, rec *Record) {
	c.SetReadDeadline(time.Now().Add(p.o.HeadTimeout))
	br := bufio.NewReaderSize(c, headBuf)
	h, err := readHead(br, p.o.MaxLineBytes, p.o.MaxHeadBytes)
	if err != nil {
		rec.Decision = p.headFailure(c, err)
		return
	}
	rec.Method, rec.Host, rec.Port = h.method, h.host, h.port
	if d, ok := p.checkRequest(h); !ok {
		rec.Decision = d
		refuse(c, d)
		return
	}
	host, d := p.o.Rules.CheckName(h.host, h.port)
	rec.Host = host.String()
	if d.Effect == Deny {
		rec.Decision = d
		refuse(c, d)
		return
	}
	if d, ok := p.admit(); !ok {
		rec.Decision = d
		refuse(c, d)
		return
	}
	up, d, err := p.dial(host, h.port, rec)
	if up == nil {
		rec.Decision = d
		if d.Effect == Deny {
			refuse(c, d)
		} else {
			rec.Err = err.Error()
			fail(c, http502, err.Error())
		}
		return
	}
	if !p.trackUp(up) {
		return
	}
	defer p.untrackUp(up)
	rec.Decision = d
	c.SetReadDeadline(time.Time{})
	if h.method == "CONNECT" && p.intercepts(host, h.port) {
		p.intercept(c, br, up, host, h.port, rec)
		return
	}
	if h.method == "CONNECT" {
		p.tunnel(c, br, up, host, rec)
		return
	}
	p.forward(c, br, h, up, rec)
}

// headFailure answers a request head that could not be read or was refused.
func (p *Proxy) headFailure(c net.Conn, err error) Decision {
	var ne net.Error
	switch {
	case errors.Is(err, errRefused):
		d := deny("request smuggling or bounds", err.Error())
		refuse(c, d)
		return d
	case errors.As(err, &ne) && ne.Timeout():
		d := deny("head timeout", fmt.Sprintf("no complete request head within %s", p.o.HeadTimeout))
		fail(c, "408 Request Timeout", d.Reason)
		return d
	}
	return deny("no request", "the connection ended before a request head: "+err.Error())
}

// checkRequest refuses a Host header that names another host than the target,
// and a plain-HTTP head that the request parser forward uses reads otherwise
// than readHead did, or not at all: every malformed head is answered before
// anything is dialled.
func (p *Proxy) checkRequest(h *head) (Decision, bool) {
	if h.method != "CONNECT" {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(h.raw)))
		if err != nil {
			return deny("request smuggling or bounds", "malformed request head: "+err.Error()), false
		}
		if req.URL.Hostname() != h.host || req.URL.Port() != "" && req.URL.Port() != strconv.Itoa(h.port) {
			return deny("request smuggling or bounds", fmt.Sprintf("the request target %q is read two ways", clip(h.target))), false
		}
	}
	if h.hostHeader == "" {
		if h.method != "CONNECT" {
			return deny("request smuggling or bounds", "a plain-HTTP request without a Host header"), false
		}
		return Decision{}, true
	}
	def := 80
	if h.method == "CONNECT" {
		def = h.port
	}
	if !sameHost(h.hostHeader, h.host, h.port, def) {
		return deny("host mismatch", fmt.Sprintf("the Host header %q names another host than the target %s", clip(h.hostHeader), net.JoinHostPort(h.host, strconv.Itoa(h.port)))), false
	}
	return Decision{}, true
}

// admit refuses a connection once the session has spent its bytes (max_bytes,
// over its life: Budget). The connection limit is held from accept (admitConn).
func (p *Proxy) admit() (Decision, bool) {
	if p.sessionBudget().spent(p.o.Rules.policy.MaxBytes) {
		return deny("byte limit", fmt.Sprintf("the session has used its %d bytes (max_bytes, over the session's life)", p.o.Rules.policy.MaxBytes)), false
	}
	return Decision{}, true
}

// spend counts n bytes against the session's limit; false when they would pass it.
func (p *Proxy) spend(n int64) bool {
	return p.sessionBudget().spend(n, p.o.Rules.policy.MaxBytes)
}

// headBuf is the size of a client connection's read buffer: request heads are
// read through it line by line (a longer line is gathered in pieces), and a
// ClientHello is read record by record into a buffer of its own (sni.go), so
// that an idle connection holds no more.
const headBuf = 4 << 10
