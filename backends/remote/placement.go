package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/kernelfs"
)

// Placement is one session's kernel on a gateway. Its kernel does not see the host's
// session directory, so it implements executor.FileSyncer by composing a
// kernelfs.Syncer: inputs and outputs move through the kernel itself. When its
// gateway leaves the rotation it closes Lost (executor.LossReporter); the executor
// then closes its connection and moves the session. The placement never keeps the
// executor's connection: it records the id of the kernel its sync calls reached,
// for Diagnose.
//
// The executor calls PushInputs, OutputsProbe and PullOutputs from the session's
// worker, one at a time; the other methods are safe for concurrent use.
type Placement struct {
	b       *Backend
	gw      *gateway
	session string // the session id the placement was opened for (".warm-…" for the pool)
	server  executor.Server
	fs      *kernelfs.Syncer // owned by the session's worker

	mu       sync.Mutex
	kernelID string // the kernel the last sync call reached
	lostWhy  string // set when the gateway left the rotation
	closed   bool
	lost     chan struct{} // closed by lose
}

var (
	_ executor.Placement    = (*Placement)(nil)
	_ executor.Diagnoser    = (*Placement)(nil)
	_ executor.FileSyncer   = (*Placement)(nil)
	_ executor.LossReporter = (*Placement)(nil)
)

func (b *Backend) newPlacement(g *gateway, spec executor.SessionSpec) *Placement {
	// A session's own kernel name wins over the backend's. The files of every
	// session move through its kernel as Python code (kernelfs), so the executor
	// refuses a kernel whose kernel_info says it is not Python (R's "ir", say) with
	// executor.ErrKernelUnavailable before any call runs in it.
	kernel := b.opts.KernelName
	if spec.Template.Kernel != "" {
		kernel = spec.Template.Kernel
	}
	p := &Placement{
		b:       b,
		gw:      g,
		session: spec.ID,
		server: executor.Server{
			Endpoint:   g.ep,
			KernelName: kernel,
			KernelPath: b.opts.KernelPath,
			KernelEnv:  b.kernelEnv(),
		},
		fs:   kernelfs.New(b.syncOptions(g)),
		lost: make(chan struct{}),
	}
	g.register(p)
	return p
}

// Server returns the gateway's endpoint and the kernel to start.
func (p *Placement) Server() executor.Server { return p.server }

// Gateway returns the URL of the gateway the session is placed on.
func (p *Placement) Gateway() string { return p.gw.name }

// Close takes the placement out of its gateway's load. The executor has shut the
// kernel down, and the kernel removed the remote session directory as it went (a
// kernel that could not, for example on a gateway that is gone, leaves it to be
// reaped: see Options.ReapAfter).
func (p *Placement) Close(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.gw.forget(p)
	return nil
}

// PushInputs copies the named files of hostDir/inputs to the kernel's inputs/ (see
// kernelfs.Syncer.PushInputs).
func (p *Placement) PushInputs(ctx context.Context, conn *jupyter.Conn, hostDir string, names []string) error {
	if err := p.see(conn); err != nil {
		return err
	}
	return p.fs.PushInputs(ctx, conn, hostDir, names)
}

// OutputsProbe returns the expression that tells whether the kernel's outputs/
// changed (see kernelfs.Syncer.OutputsProbe).
func (p *Placement) OutputsProbe() string { return p.fs.OutputsProbe() }

// PullOutputs copies the new or changed files of the kernel's outputs/ into
// hostDir/outputs/ (see kernelfs.Syncer.PullOutputs).
func (p *Placement) PullOutputs(ctx context.Context, conn *jupyter.Conn, hostDir string, probe json.RawMessage) error {
	if err := p.see(conn); err != nil {
		return err
	}
	return p.fs.PullOutputs(ctx, conn, hostDir, probe)
}

// see records the kernel a sync call reaches. Once the gateway has left the
// rotation it fails with the reason: the executor is moving the session.
func (p *Placement) see(conn *jupyter.Conn) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lostWhy != "" {
		return errors.New(p.lostWhy)
	}
	p.kernelID = conn.KernelID()
	return nil
}

// lose is called when the gateway left the rotation: it closes Lost, so that the
// executor closes the session's connection (a call in flight fails, and Diagnose
// says why) and starts the session's next call on another gateway, reporting
// state_lost.
func (p *Placement) lose(why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lostWhy != "" {
		return
	}
	p.lostWhy = why
	close(p.lost)
	p.b.log.Info("session lost: its gateway left the rotation", "session", p.session, "gateway", p.gw.name)
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

// Diagnose explains a kernel's death from the gateway's side: the gateway left the
// rotation or is unreachable, or no longer has the kernel. It returns "" when the
// gateway answers and still has the kernel, or when it does not know.
func (p *Placement) Diagnose(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, min(p.b.opts.HealthTimeout, 5*time.Second))
	defer cancel()
	if _, err := p.gw.client.Version(ctx); err != nil {
		return fmt.Sprintf("gateway %s is unreachable (%v)", p.gw.name, err)
	}
	p.mu.Lock()
	id, why := p.kernelID, p.lostWhy
	p.mu.Unlock()
	if why != "" && !p.gw.status().Healthy {
		return why
	}
	if id == "" {
		return ""
	}
	if _, err := p.gw.client.Kernel(ctx, id); errors.Is(err, jupyter.ErrNotFound) {
		return fmt.Sprintf("gateway %s no longer has kernel %s (it was culled or shut down, or its pod was deleted)", p.gw.name, id)
	}
	return ""
}
