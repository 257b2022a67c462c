package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kernelbox/kernelbox/backends/internal/kernelfiles"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
)

// Placement is one session's kernel on a gateway. Its kernel does not see the host's
// session directory, so its embedded kernelfiles.Files moves inputs and outputs
// through the kernel itself (executor.FileSyncer) and serves the session files API
// there (its KernelFiles). When its gateway leaves the rotation it closes Lost
// (executor.LossReporter); the executor then closes its connection and moves the
// session. The placement never keeps the executor's connection: it records the id
// of the kernel its file calls reached, for Diagnose.
//
// The executor calls PushInputs, OutputsProbe, PullOutputs and KernelFiles from the
// session's worker, one at a time; the other methods are safe for concurrent use.
type Placement struct {
	*kernelfiles.Files // the session's files, through its kernel

	b       *Backend
	gw      *gateway
	session string // the session id the placement was opened for (".warm-…" for the pool)
	server  executor.Server
	loss    kernelfiles.Loss // lost when the gateway leaves the rotation

	started time.Time

	mu       sync.Mutex
	closed   bool
	released bool   // Detach let go of it: its kernel runs on for the next start
	kernelID string // the kernel the last file sync reached (keep.go)
	dir      string // the session's directory in that kernel
	// keptKernel is the kernel the placement was taken back with (Reattach):
	// Close shuts it down, since the executor may close a placement it did not
	// claim without shutting its kernel down.
	keptKernel string
}

var (
	_ executor.Placement    = (*Placement)(nil)
	_ executor.Diagnoser    = (*Placement)(nil)
	_ executor.FileSyncer   = (*Placement)(nil)
	_ executor.LossReporter = (*Placement)(nil)
	_ executor.Adopter      = (*Placement)(nil)
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
		started: time.Now(),
		server: executor.Server{
			Endpoint:   g.ep,
			KernelName: kernel,
			KernelPath: b.opts.KernelPath,
			KernelEnv:  b.kernelEnv(),
		},
	}
	// Without a disk quota, the session's byte budget is Options.Sync's
	// MaxSessionBytes, since a gateway's disk has no quota of kernelbox's.
	p.Files = kernelfiles.New(b.syncOptions(g), 0, &p.loss)
	g.register(p)
	return p
}

// Server returns the gateway's endpoint and the kernel to start.
func (p *Placement) Server() executor.Server { return p.server }

// Gateway returns the URL of the gateway the session is placed on.
func (p *Placement) Gateway() string { return p.gw.name }

// Close takes the placement out of its gateway's load and out of the state file.
// The executor has shut the kernel down, and the kernel removed the remote session
// directory as it went (a kernel that could not, for example on a gateway that is
// gone, leaves it to be reaped: see Options.Sync). A placement taken back after a
// restart shuts its kept kernel down too, in case no session claimed it.
func (p *Placement) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	kept := p.keptKernel
	if p.released {
		kept = ""
	}
	p.mu.Unlock()
	p.gw.forget(p)
	p.b.saveKept()
	if kept == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.b.opts.HealthTimeout)
	defer cancel()
	if err := p.gw.client.Shutdown(ctx, kept); err != nil && !errors.Is(err, jupyter.ErrNotFound) {
		return fmt.Errorf("shut down kept kernel %s: %w", kept, err)
	}
	return nil
}

// PushInputs pushes the inputs through the kernel (kernelfiles.Files.PushInputs)
// and records the kernel and directory it reached, for the state file.
func (p *Placement) PushInputs(ctx context.Context, conn *jupyter.Conn, hostDir string, names []string) error {
	err := p.Files.PushInputs(ctx, conn, hostDir, names)
	if err == nil {
		p.noteKernel()
	}
	return err
}

// PullOutputs pulls the outputs through the kernel (kernelfiles.Files.PullOutputs)
// and records the kernel and directory it reached, for the state file.
func (p *Placement) PullOutputs(ctx context.Context, conn *jupyter.Conn, hostDir string, probe json.RawMessage) error {
	err := p.Files.PullOutputs(ctx, conn, hostDir, probe)
	if err == nil {
		p.noteKernel()
	}
	return err
}

// Adopt records the session that took a warm pool's placement
// (executor.Adopter), so that the state file lists its kernel under it.
func (p *Placement) Adopt(_ context.Context, session string) error {
	p.mu.Lock()
	p.session = session
	p.mu.Unlock()
	p.b.saveKept()
	return nil
}

// lose is called when the gateway left the rotation: it closes Lost, so that the
// executor closes the session's connection (a call in flight fails, and Diagnose
// says why) and starts the session's next call on another gateway, reporting
// state_lost.
func (p *Placement) lose(why string) {
	if p.loss.Lose(why) {
		p.mu.Lock()
		session := p.session
		p.mu.Unlock()
		p.b.log.Info("session lost: its gateway left the rotation", "session", session, "gateway", p.gw.name)
		p.b.saveKept()
	}
}

// lostReason says why the gateway left the rotation, or "" while it has not.
func (p *Placement) lostReason() string { return p.loss.Reason() }

// Diagnose explains a kernel's death from the gateway's side: the gateway left the
// rotation or is unreachable, or no longer has the kernel. It returns "" when the
// gateway answers and still has the kernel, or when it does not know.
func (p *Placement) Diagnose(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, min(p.b.opts.HealthTimeout, 5*time.Second))
	defer cancel()
	if _, err := p.gw.client.Version(ctx); err != nil {
		return fmt.Sprintf("gateway %s is unreachable (%v)", p.gw.name, err)
	}
	id, why := p.KernelID(), p.lostReason()
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
