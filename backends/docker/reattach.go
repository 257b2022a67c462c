package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"syscall"

	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
	"github.com/kernelbox/kernelbox/backends/internal/keep"
	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
	"github.com/kernelbox/kernelbox/backends/internal/sessionproxy"
	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
)

var _ executor.Reattacher = (*Backend)(nil)

// Reattach takes back the containers the state file (Options.StateFile) listed
// when New read it: each that still runs, whose server's socket is the one the
// earlier process pinned (same device and inode: code in the container cannot
// have put a socket of its own in its place) and whose server answers with its
// token becomes a Placement again, as Open would have returned it, with its
// egress proxy listening in its network namespace again when it had an allowlist
// (readoptEgress; a container whose proxy cannot be made again is not taken
// back). The others
// are removed with their state directories and returned with Lost saying why.
// Without a state file, or with one that could not be read (the error says
// why), it returns none. It is called once; the state file is rewritten with what
// was taken back.
func (b *Backend) Reattach(ctx context.Context) ([]executor.Reattached, error) {
	kept, err := b.kept.Take()
	if err != nil {
		return nil, fmt.Errorf("reattach containers: %w", err)
	}
	out := keep.Reattach(ctx, slices.Collect(maps.Values(kept)), keep.DefaultAtOnce, b.reattachOne)
	b.saveKept()
	return out, nil
}

// reattachOne takes back one kept container, or removes it and says why not.
func (b *Backend) reattachOne(ctx context.Context, k keptContainer) executor.Reattached {
	r := executor.Reattached{Session: k.Session}
	log := b.cfg.log.With("session", k.Session, "container", dockerapi.Short(k.ID))
	fail := func(why string) executor.Reattached {
		err := b.removeContainer(ctx, k.ID)
		_ = os.RemoveAll(k.SockDir)
		log.Warn("kept container not adopted; removed", "reason", why, "err", err)
		r.Lost = why
		return r
	}
	insp, err := b.api.ContainerInspect(ctx, k.ID, client.ContainerInspectOptions{})
	if dockerapi.IsNotFound(err) {
		return fail(fmt.Sprintf("its container %s was removed while kernelbox was not running", k.Name))
	}
	if err != nil {
		return fail("inspect its container: " + err.Error())
	}
	c := insp.Container
	switch {
	case c.Config == nil || c.Config.Labels[LabelCreatedBy] != sandbox.CreatedBy || socketDirOf(c.Mounts) != k.SockDir:
		return fail(fmt.Sprintf("container %s is not the one the state file describes", dockerapi.Short(k.ID)))
	case k.Egress && k.Policy == nil:
		return fail("its network allowlist's egress proxy ran in the previous kernelbox process")
	case c.State == nil || !c.State.Running:
		code, oom := 0, false
		if c.State != nil {
			code, oom = c.State.ExitCode, c.State.OOMKilled
		}
		return fail(fmt.Sprintf("its container %s stopped while kernelbox was not running (exit code %d, OOM-killed %t)", k.Name, code, oom))
	}
	if k.Relay {
		return b.reattachRelay(ctx, k, c.State.Pid, fail)
	}
	sock, err := pinServerSocket(c.State.Pid)
	if err != nil {
		return fail("its server's socket is gone: " + err.Error())
	}
	if dev, ino := fileID(sock); dev != k.SockDev || ino != k.SockIno {
		_ = sock.Close()
		return fail("its server's socket was replaced while kernelbox was not running (it is not the socket the server made)")
	}
	hc := socketHTTPClient(fdPath(sock))
	err = probe(ctx, hc, k.Token)
	hc.CloseIdleConnections()
	if err != nil {
		_ = sock.Close()
		return fail("its server does not answer: " + err.Error())
	}
	var px *sessionproxy.Proxy
	var rules *egress.Rules
	if k.Policy != nil {
		if px, rules, err = b.readoptEgress(c.State.Pid, k); err != nil {
			_ = sock.Close()
			return fail("its network allowlist's proxy: " + err.Error())
		}
	}
	p := b.keptPlacement(k, c.State.Pid, sock, nil)
	p.egress, p.egressKept = px, rules
	b.adoptPlacement(p)
	log.Info("container adopted", "name", k.Name, "egress", px != nil)
	p.nameAfterSession(ctx)
	r.Placement = p
	return r
}

// keptPlacement makes the Placement of a kept container whose server answered on
// sock, not yet tracked (adoptPlacement).
func (b *Backend) keptPlacement(k keptContainer, pid int, sock *os.File, relay *relayHost) *Placement {
	p := &Placement{
		b: b, id: k.ID, key: k.Key, name: k.Name, session: k.Session, sockDir: k.SockDir, started: k.Started,
		lost: make(chan struct{}), memory: k.Memory, memTmpl: k.MemTmpl, lifetime: k.Lifetime,
		sock: sock, sockDev: k.SockDev, sockIno: k.SockIno, pid: pid, relay: relay,
		server: executor.Server{
			Endpoint:   jupyter.Endpoint{URL: "http://localhost", Token: k.Token, Socket: sockPath(sock)},
			KernelName: k.Kernel,
		},
	}
	if relay != nil {
		p.server.Endpoint.Dial = relay.dial
		p.watchRelay()
	}
	p.ready.Store(true)
	if f, err := oomCounterFile(pid, p.id); err == nil {
		if n, err := readOOMKills(f); err == nil {
			p.oomFile, p.oomSeen = f, n
		}
	}
	return p
}

// adoptPlacement tracks a kept container's Placement made by keptPlacement
// and watches for its exit.
func (b *Backend) adoptPlacement(p *Placement) {
	b.track(p)
	p.watchExit()
}

// Detach ends the backend without stopping its session containers: the state file
// keeps them for the next backend with the same StateFile, which takes them back
// (Reattach). Opens in flight are aborted; containers that cannot be taken back
// later (a warm pool's, one whose egress proxy a forwarder or the relay reaches
// or that has secrets, one not ready) are removed. The
// backend is closed after it. Without a StateFile it is Close.
func (b *Backend) Detach(ctx context.Context) error {
	if b.cfg.stateFile == "" {
		return b.Close(ctx)
	}
	if !b.gate.Shut() {
		return nil
	}
	ctx, cancel := teardownContext(ctx)
	defer cancel()
	b.mu.Lock()
	all := slices.Collect(maps.Values(b.placements))
	b.mu.Unlock()
	kept, errs := keep.Detach(ctx, all, keeper{}, &b.keptFile, b.writeKept)
	removed := len(errs)
	b.pylib.stop()
	errs = append(errs, b.api.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("detach docker backend: %w", err)
	}
	b.cfg.log.Info("docker backend detached: its containers are kept for the next start", "kept", len(kept), "removed", removed)
	return nil
}

// keeper is what Detach does with each placement (keep.Keeper).
type keeper struct{}

// Keep: a ready session's container can be taken back without an egress proxy
// (which runs in this process), or with one that listens in its network
// namespace, where the next process listens again (readoptEgress).
func (keeper) Keep(p *Placement) bool {
	_, ok := p.record()
	return ok && (p.egress == nil || p.egressKept != nil)
}

// Drop removes the container.
func (keeper) Drop(ctx context.Context, p *Placement) error { return p.close(ctx) }

// Release lets go of the container without stopping it: the exit watch, the
// kernel watch and the pinned socket.
func (keeper) Release(p *Placement) {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.stopWatch != nil {
		p.stopWatch()
		p.stopWatch = nil
	}
	p.watched.Set(nil)
	if p.sock != nil {
		_ = p.sock.Close()
	}
	// The relay in the container reconnects to the next process's socket.
	p.relay.close()
	// Its listener in the container's namespace goes with this process; the
	// next listens there again.
	p.egress.Close()
	p.closed = true
}

// fileID returns the device and inode of f, or zeros when it cannot be read.
func fileID(f *os.File) (dev, ino uint64) {
	fi, err := f.Stat()
	if err != nil {
		return 0, 0
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return uint64(st.Dev), st.Ino //nolint:unconvert // Dev is not uint64 on every platform
}
