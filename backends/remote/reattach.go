package remote

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kernelbox/kernelbox/backends/internal/keep"
	"github.com/kernelbox/kernelbox/backends/internal/kernelfiles"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/kernelfs"
)

var _ executor.Reattacher = (*Backend)(nil)

// Bounds of taking one kept kernel back.
const (
	reattachTimeout = 20 * time.Second
	// busyWait is how long a kept kernel is given to answer one question before
	// it is taken for busy (with a call of the previous process) and interrupted.
	busyWait = 3 * time.Second
	// connectionsWait is how long a kept kernel that still shows a connection is
	// given to lose it: the previous process's, which its gateway may not have
	// seen close yet.
	connectionsWait = 3 * time.Second
	// reattachAtOnce bounds the kept kernels checked at once: a state file may
	// list thousands (4 MiB of records), and each check holds a WebSocket.
	reattachAtOnce = keep.DefaultAtOnce
)

// Reattach takes back the kernels the state file (Options.StateFile) listed when
// New read it. A kernel comes back as a Placement, as Open and the kernel's start
// had made it, when its gateway is still configured and answers, still has it,
// with the same kernelspec, nobody else is connected to it, and it holds the
// session's directory, whose name has 128 random bits the kernelbox that made
// it drew: that is how the backend knows the kernel is its own and not another
// client's that a tampered state file names. A kernel that does not answer
// within busyWait, busy (most likely with the previous process's call), is
// interrupted and asked again. The others
// are returned with Lost saying why, and left alone: a kernel that is not
// recognised is never interrupted after the question, shut down or used.
// Without a state file, or with one that could not be read (the error says why),
// it returns none. It is called once; the state file is rewritten with what was
// taken back.
func (b *Backend) Reattach(ctx context.Context) ([]executor.Reattached, error) {
	kept, err := b.kept.Take()
	if err != nil {
		return nil, fmt.Errorf("reattach kernels: %w", err)
	}
	out := keep.Reattach(ctx, kept, reattachAtOnce, b.reattachOne)
	b.saveKept()
	return out, nil
}

// reattachOne takes back one kept kernel, or says why not.
func (b *Backend) reattachOne(ctx context.Context, k keptKernel) executor.Reattached {
	log := b.log.With("session", k.Session, "kernel_id", k.KernelID, "gateway", k.Gateway)
	r := executor.Reattached{Session: k.Session}
	g := b.gatewayAt(k.Gateway)
	if g == nil {
		r.Lost = fmt.Sprintf("gateway %s is not configured any more (its kernel %s is left there as it is)", k.Gateway, k.KernelID)
		log.Warn("kept kernel not taken back", "reason", r.Lost)
		return r
	}
	ctx, cancel := context.WithTimeout(ctx, reattachTimeout)
	defer cancel()
	if why := b.recognise(ctx, g, k); why != "" {
		r.Lost = why
		log.Warn("kept kernel not taken back", "reason", why)
		return r
	}
	r.Placement, r.KernelID = b.keptPlacement(g, k), k.KernelID
	log.Info("kept kernel taken back")
	return r
}

// gatewayAt returns the configured gateway at url, or nil.
func (b *Backend) gatewayAt(url string) *gateway {
	for _, g := range b.gateways {
		if g.url == url {
			return g
		}
	}
	return nil
}

// recognise says why kept kernel k on g cannot be taken back, or "" when it can
// (see Reattach).
func (b *Backend) recognise(ctx context.Context, g *gateway, k keptKernel) string {
	if why := keptKernelModel(ctx, g, k); why != "" {
		return why
	}
	conn, err := g.client.Connect(ctx, k.KernelID, &jupyter.ConnOptions{ReconnectTimeout: -1, Logger: b.log})
	if err != nil {
		return fmt.Sprintf("gateway %s is unreachable: connect to kernel %s: %v", g.name, k.KernelID, err)
	}
	defer conn.Close()
	holds, err := askHolds(ctx, conn, k.Dir, busyWait)
	if err != nil && ctx.Err() == nil {
		// No answer: the kernel is busy, most likely with a call of the previous
		// process (lost with it; the executor would interrupt it too). The
		// server's execution_state cannot tell: it was seen "idle" and "starting"
		// for kernels in the middle of a time.sleep.
		if err := g.client.Interrupt(ctx, k.KernelID); err != nil {
			return fmt.Sprintf("interrupt kernel %s on gateway %s: %v", k.KernelID, g.name, err)
		}
		b.log.Info("kept kernel busy: interrupted before it is recognised", "session", k.Session, "kernel_id", k.KernelID, "waited", busyWait)
		for {
			// The first question may come back aborted, with the interrupted call.
			if holds, err = askHolds(ctx, conn, k.Dir, busyWait); err == nil || ctx.Err() != nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	switch {
	case err != nil:
		return fmt.Sprintf("kernel %s on gateway %s did not answer whether it is the session's: %v", k.KernelID, g.name, err)
	case !holds:
		return fmt.Sprintf("kernel %s on gateway %s is not the one kernelbox started for the session (it does not hold the session's directory); it is left alone", k.KernelID, g.name)
	}
	return ""
}

// askHolds asks the kernel behind conn, within wait, whether it holds dir.
func askHolds(ctx context.Context, conn *jupyter.Conn, dir string, wait time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var fk kernelfs.Kernel
	return fk.HoldsDir(ctx, conn, dir)
}

// keptKernelModel says why kept kernel k cannot be taken back as g lists it, or
// "": g does not have it or does not answer, it runs another kernelspec, or
// another client is connected to it.
func keptKernelModel(ctx context.Context, g *gateway, k keptKernel) string {
	deadline := time.Now().Add(connectionsWait)
	for {
		km, err := g.client.Kernel(ctx, k.KernelID)
		switch {
		case errors.Is(err, jupyter.ErrNotFound):
			return fmt.Sprintf("gateway %s no longer has kernel %s (it was shut down or culled while kernelbox was not running)", g.name, k.KernelID)
		case err != nil:
			return fmt.Sprintf("gateway %s is unreachable: %v", g.name, err)
		case k.Kernel != "" && km.Name != k.Kernel:
			return fmt.Sprintf("kernel %s on gateway %s runs kernelspec %q, not the session's %q: it is not the kernel kernelbox started; it is left alone", k.KernelID, g.name, km.Name, k.Kernel)
		case km.Connections == 0:
			return ""
		case time.Now().After(deadline):
			return fmt.Sprintf("kernel %s on gateway %s has %d open connection(s): another client holds it (another kernelbox on a copy of this workspace?); it is left alone", k.KernelID, g.name, km.Connections)
		}
		select {
		case <-ctx.Done():
			return fmt.Sprintf("gateway %s did not answer in time: %v", g.name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// keptPlacement makes the Placement of a kept kernel that was recognised, on
// g's load.
func (b *Backend) keptPlacement(g *gateway, k keptKernel) *Placement {
	kernel := k.Kernel
	p := &Placement{
		b: b, gw: g, session: k.Session, started: k.Started,
		kernelID: k.KernelID, dir: k.Dir, keptKernel: k.KernelID,
		server: executor.Server{Endpoint: g.ep, KernelName: kernel, KernelPath: b.opts.KernelPath, KernelEnv: b.kernelEnv()},
	}
	p.Files = kernelfiles.New(b.syncOptions(g), 0, &p.loss)
	p.Files.Resume(k.Dir)
	g.mu.Lock()
	g.placements[p] = struct{}{}
	g.mu.Unlock()
	return p
}

// Detach ends the backend without shutting its sessions' kernels down: the state
// file keeps them for the next backend with the same StateFile, which takes them
// back (Reattach). Placements that cannot be taken back later (a warm pool's, a
// lost one, one whose kernel no call reached) are left to the executor, which has
// shut their kernels down. The backend is closed after it. Without a StateFile it
// is Close.
func (b *Backend) Detach(ctx context.Context) error {
	if b.opts.StateFile == "" {
		return b.Close(ctx)
	}
	if !b.gate.Shut() {
		return nil
	}
	list := b.placementList()
	kept, _ := keep.Detach(ctx, list, keeper{}, &b.keptFile, func() { b.writeKept(list) })
	keep.Unlock(b.stateLock)
	b.log.Info("remote backend detached: its sessions' kernels are kept for the next start", "kept", len(kept))
	return b.stopChecks(ctx)
}

// keeper is what Detach does with each placement (keep.Keeper).
type keeper struct{}

// Keep: a live session's kernel that a call reached can be taken back.
func (keeper) Keep(p *Placement) bool {
	_, ok := p.record()
	return ok
}

// Drop does nothing: the executor has shut the kernel down, which removed the
// session's directory.
func (keeper) Drop(context.Context, *Placement) error { return nil }

// Release lets go of the kernel: a later Close of the placement does not shut
// it down.
func (keeper) Release(p *Placement) {
	p.mu.Lock()
	p.released = true
	p.mu.Unlock()
}
