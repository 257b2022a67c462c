package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
)

// Placement is one session's kernel on a gateway. Its kernel does not see the host's
// session directory, so it implements executor.FileSyncer: inputs and outputs move
// through the kernel itself.
//
// The executor calls PushInputs and PullOutputs from the session's worker, one at a
// time; the other methods are safe for concurrent use.
type Placement struct {
	b       *Backend
	gw      *gateway
	session string // the session id the placement was opened for (".warm-…" for the pool)
	server  executor.Server
	seq     atomic.Uint64 // payload sequence numbers

	mu       sync.Mutex
	conn     *jupyter.Conn // the session's connection as last seen by a sync call
	lostWhy  string        // set when the gateway left the rotation
	lostConn *jupyter.Conn // the connection closed then
	closed   bool
	lost     chan struct{} // closed by lose

	// sync state, owned by the session's worker
	sync syncState
}

var (
	_ executor.Placement    = (*Placement)(nil)
	_ executor.Diagnoser    = (*Placement)(nil)
	_ executor.FileSyncer   = (*Placement)(nil)
	_ executor.LossReporter = (*Placement)(nil)
)

func (b *Backend) newPlacement(g *gateway, spec executor.SessionSpec) *Placement {
	p := &Placement{
		b:       b,
		gw:      g,
		session: spec.ID,
		server: executor.Server{
			Endpoint:   g.ep,
			KernelName: b.opts.KernelName,
			KernelPath: b.opts.KernelPath,
			KernelEnv:  b.kernelEnv(),
		},
	}
	p.lost = make(chan struct{})
	p.sync.init()
	g.register(p)
	return p
}

// Server returns the gateway's endpoint and the kernel to start.
func (p *Placement) Server() executor.Server { return p.server }

// Gateway returns the URL of the gateway the session is placed on.
func (p *Placement) Gateway() string { return p.gw.name }

// Close takes the placement out of its gateway's load. The executor has shut the
// kernel down. The remote session directory stays, as host session directories do.
func (p *Placement) Close(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.conn = nil
	p.gw.forget(p)
	return nil
}

// track remembers the session's current connection, so that the health checker can
// close it when the gateway goes away. It fails when the connection is one that was
// closed for that reason.
func (p *Placement) track(conn *jupyter.Conn) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lostWhy != "" {
		if conn == p.lostConn {
			return errors.New(p.lostWhy)
		}
		// A connection made since: the kernel was reached again.
		p.lostWhy, p.lostConn = "", nil
	}
	p.conn = conn
	return nil
}

// lose is called when the gateway left the rotation: it closes the session's
// connection, so that the executor's next call finds it gone, fails to reconnect to
// the kernel and starts a fresh one on another gateway (reporting state_lost). A
// call in flight fails, and Diagnose says why.
func (p *Placement) lose(why string) {
	p.mu.Lock()
	select {
	case <-p.lost:
	default:
		close(p.lost)
	}
	p.lostWhy = why
	conn := p.conn
	p.lostConn, p.conn = conn, nil
	p.mu.Unlock()
	if conn == nil {
		return
	}
	p.b.log.Info("closing the session's kernel connection: its gateway left the rotation", "session", p.session, "gateway", p.gw.name)
	// Close waits for the connection's goroutines: do not hold up the caller.
	if !p.b.spawn(func() { _ = conn.Close() }) {
		_ = conn.Close()
	}
}

// Lost returns a channel closed when the placement's gateway leaves the rotation
// (see executor.LossReporter): the session then moves to another gateway.
func (p *Placement) Lost() <-chan struct{} { return p.lost }

// lostReason says why the gateway left the rotation, or "" while it has not.
func (p *Placement) lostReason() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lostWhy
}

// Diagnose explains a kernel's death from the gateway's side: the gateway is
// unreachable, or no longer has the kernel. It returns "" when the gateway answers
// and still has the kernel, or when it does not know.
func (p *Placement) Diagnose(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, min(p.b.opts.HealthTimeout, 5*time.Second))
	defer cancel()
	if _, err := p.gw.client.Version(ctx); err != nil {
		return fmt.Sprintf("gateway %s is unreachable (%v)", p.gw.name, err)
	}
	p.mu.Lock()
	conn, why := p.conn, p.lostWhy
	if conn == nil {
		conn = p.lostConn
	}
	p.mu.Unlock()
	if why != "" && !p.gw.status().Healthy {
		return why
	}
	if conn == nil {
		return ""
	}
	if _, err := p.gw.client.Kernel(ctx, conn.KernelID()); errors.Is(err, jupyter.ErrNotFound) {
		return fmt.Sprintf("gateway %s no longer has kernel %s (it was culled or shut down, or its pod was deleted)", p.gw.name, conn.KernelID())
	}
	return ""
}
