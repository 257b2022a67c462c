package swarm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
	"github.com/kernelbox/kernelbox/backends/internal/kernelfiles"
	"github.com/kernelbox/kernelbox/backends/internal/sessionproxy"
	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
)

// Placement is one session's service. Its kernel does not see the host's session
// directory, so its embedded kernelfiles.Files moves inputs and outputs through the
// kernel (executor.FileSyncer) and serves the session files API there
// (its KernelFiles), as the remote backend's placements do. When its task ends
// or its node goes down or is drained, it closes Lost (executor.LossReporter) and
// Diagnose names the node.
//
// The executor calls PushInputs, OutputsProbe, PullOutputs and KernelFiles from the
// session's worker, one at a time; the other methods are safe for concurrent use.
type Placement struct {
	*kernelfiles.Files // the session's files, in the task's /workspace

	b       *Backend
	obj     sessionObjects
	service string // service id
	task    string // the task id
	nodeID  string
	node    string // the node's name for messages
	addr    netip.AddrPort
	server  executor.Server
	started time.Time
	// workSize is the session's byte budget in its /workspace tmpfs.
	workSize int64
	loss     kernelfiles.Loss // lost when the task ends or its node goes
	// egress is the session's proxy at proxy, kernelbox's address on its
	// network, enforcing rules; nil without an allowlist (egress.go).
	egress *sessionproxy.Proxy
	proxy  netip.AddrPort
	rules  *egress.Rules

	mu       sync.Mutex
	closed   bool
	closeErr error
}

var (
	_ executor.Placement    = (*Placement)(nil)
	_ executor.FileSyncer   = (*Placement)(nil)
	_ executor.LossReporter = (*Placement)(nil)
	_ executor.Diagnoser    = (*Placement)(nil)
	_ executor.Adopter      = (*Placement)(nil)
)

// Server returns the task's Jupyter server on its overlay address.
func (p *Placement) Server() executor.Server { return p.server }

// Node names the node the swarm placed the session on.
func (p *Placement) Node() string { return p.node }

// Service returns the session's service name.
func (p *Placement) Service() string { return p.obj.name }

// Close removes the session's service, secret and network (detaching kernelbox's
// container from it first). It runs under its own bounded context.
func (p *Placement) Close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	return p.close(ctx)
}

func (p *Placement) close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		err := p.closeErr
		p.mu.Unlock()
		return err
	}
	p.closed = true
	p.mu.Unlock()
	b := p.b
	var errs []error
	if _, err := b.api.ServiceRemove(ctx, p.service, client.ServiceRemoveOptions{}); err != nil && !dockerapi.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("remove service %s: %w", p.obj.name, err))
	}
	p.egress.Close()
	errs = append(errs, b.retryInUse(ctx, "remove secret "+p.obj.name+"-token", func() error {
		_, err := b.api.SecretRemove(ctx, p.obj.secret, client.SecretRemoveOptions{})
		return err
	}))
	errs = append(errs, b.removeNetwork(ctx, p.obj.network, p.obj.name))
	if b.forget(p) {
		b.keptChanged() // the state file no longer lists it
	}
	err := errors.Join(errs...)
	p.mu.Lock()
	p.closeErr = err
	p.mu.Unlock()
	return err
}

// Diagnose says why the kernel is gone when the swarm knows: its task ended, or its
// node is down or drained.
func (p *Placement) Diagnose(ctx context.Context) string {
	if why := p.lostReason(); why != "" {
		return why
	}
	p.b.checkOnce(ctx)
	return p.lostReason()
}

// lostReason says why the session's task is gone, or "" while it runs.
func (p *Placement) lostReason() string { return p.loss.Reason() }

// lose records why the session's task is gone and closes Lost, once, unless the
// placement is closed (its task was removed on purpose).
func (p *Placement) lose(why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed && p.loss.Lose(why) {
		p.b.cfg.log.Warn("session lost", "session", p.obj.session, "service", p.obj.name, "reason", why)
	}
}
