// Package sessionproxy runs one session's egress proxy (package egress) for the
// docker and swarm backends, and turns what its connections did into the notes of
// the session's calls (executor.NetworkReporter). Each backend gives it a listener
// only its session's kernel reaches — a unix socket in the docker container's
// /tmp, kernelbox's own address on the swarm session's overlay — so the listener
// names the session. Start reading at [Start].
package sessionproxy

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
)

// MaxNotes bounds the notes one call gets; the rest are counted in a last note.
const MaxNotes = 20

// Options configure a session's proxy.
type Options struct {
	// Rules is the session's template's allowlist; required.
	Rules *egress.Rules
	// Session names the session in records and logs: its id, or a warm pool
	// member's placeholder (Warm) until Adopt.
	Session string
	// Warm says Session is a warm pool member's placeholder: the proxy spends
	// from a budget of its own until Adopt gives it the session's.
	Warm bool
	// Budgets holds the sessions' byte budgets (Budgets.Of). Defaults to none:
	// each proxy has a budget of its own.
	Budgets *Budgets
	// Limiter bounds the connections of every session's proxy together
	// (egress.Options.Limiter). Defaults to none.
	Limiter *egress.Limiter
	// TestHosts is egress.Options.TestHosts: name resolution for a test
	// internet; nil (servers) resolves names with the machine's resolver.
	TestHosts map[string][]netip.Addr
	// Logger receives the proxy's refusals. Defaults to discarding.
	Logger *slog.Logger
	// Intercept is egress.Options.Intercept: what adding Rules' secrets
	// takes. Defaults to nil (a CONNECT to a host with a secret is refused).
	Intercept *egress.Intercept
}

// Proxy is one session's running egress proxy and what its connections did since
// the last report. It is safe for concurrent use; a nil *Proxy (a session
// without an allowlist) reports nothing.
type Proxy struct {
	proxy   *egress.Proxy
	budgets *Budgets
	served  chan struct{} // closed when Serve returned
	mu      sync.Mutex
	rep     executor.NetworkReport
	dropped int
}

// Start serves a proxy enforcing o.Rules on ln until Close. It owns ln from
// then on, and closes it when it fails.
func Start(ln net.Listener, o Options) (*Proxy, error) {
	p := &Proxy{served: make(chan struct{}), budgets: o.Budgets}
	var budget *egress.Budget
	if !o.Warm {
		budget = o.Budgets.Of(o.Session)
	}
	px, err := egress.New(egress.Options{
		Rules: o.Rules, Session: o.Session, TestHosts: o.TestHosts, Budget: budget, Limiter: o.Limiter,
		OnRecord: p.record, Logger: o.Logger, Intercept: o.Intercept,
	})
	if err != nil {
		ln.Close()
		return nil, err
	}
	p.proxy = px
	go func() { defer close(p.served); px.Serve(ln) }() // Serve logs why it ends
	return p, nil
}

// Adopt gives a warm pool member's proxy to session (executor.Adopter): its
// records and logs name the session from now on, and it spends from the
// session's budget. A nil Proxy does nothing.
func (p *Proxy) Adopt(session string) {
	if p == nil {
		return
	}
	p.proxy.Adopt(session, p.budgets.Of(session))
}

// record keeps a connection's note for the next call (egress.Options.OnRecord).
func (p *Proxy) record(r egress.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.Decision.Effect == egress.Deny {
		p.rep.Refused++
	} else {
		p.rep.Allowed++
	}
	p.rep.Up += r.Up
	p.rep.Down += r.Down
	if len(p.rep.Notes) >= MaxNotes {
		p.dropped++
		return
	}
	p.rep.Notes = append(p.rep.Notes, r.String())
}

// settleGrace bounds Take's wait for the call's connections to be recorded
// (egress.Proxy.Settle).
const settleGrace = 250 * time.Millisecond

// Take returns and forgets what the connections that ended since the last call
// did (executor.NetworkReporter's TakeNetwork). It waits, at most settleGrace,
// for the connections the call opened or closed to be recorded, so that their
// notes come with this call rather than the next.
func (p *Proxy) Take() executor.NetworkReport {
	if p == nil {
		return executor.NetworkReport{}
	}
	p.proxy.Settle(settleGrace)
	p.budgets.Save(false)
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.rep
	if p.dropped > 0 {
		out.Notes = append(out.Notes, fmt.Sprintf("network: %d more connections not listed (limit %d notes per call)", p.dropped, MaxNotes))
	}
	p.rep, p.dropped = executor.NetworkReport{}, 0
	return out
}

// Stats returns the proxy's counters, and false for a nil Proxy.
func (p *Proxy) Stats() (egress.Stats, bool) {
	if p == nil {
		return egress.Stats{}, false
	}
	return p.proxy.Stats(), true
}

// Close stops the proxy, cuts its connections and waits for them. A nil Proxy
// does nothing.
func (p *Proxy) Close() {
	if p == nil {
		return
	}
	p.proxy.Close()
	<-p.served
	p.budgets.Save(true)
}

// Env is what a kernel's environment gets to reach the proxy at url
// ("http://addr:port"): the common proxy variables in both cases (curl reads
// the lower-case http_proxy only), pip's, and no proxy for loopback.
func Env(url string) []string {
	env := []string{"NO_PROXY=localhost,127.0.0.1", "no_proxy=localhost,127.0.0.1", "PIP_PROXY=" + url}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, k+"="+url, strings.ToLower(k)+"="+url)
	}
	return env
}
