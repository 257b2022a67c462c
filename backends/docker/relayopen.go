package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
	"github.com/kernelbox/kernelbox/executor"
)

// The relay transport's steps of Open (open.go), adoption (reattach.go) and egress
// (egress.go).

// sessionRuntime checks the session's runtime (its template's, else the
// backend's) against the daemon's, asking the daemon again when it is not among
// those known at New (registered since), and returns the session's transport.
func (b *Backend) sessionRuntime(ctx context.Context, l *launch) (string, error) {
	if err := checkRuntime(l.cfg.runtime, b.knownRuntimes()); err != nil {
		rs, qerr := daemonRuntimes(ctx, b.api)
		if qerr != nil {
			return "", errors.Join(err, qerr)
		}
		if err := checkRuntime(l.cfg.runtime, rs); err != nil {
			return "", err
		}
		b.mu.Lock()
		b.runtimes = rs
		b.mu.Unlock()
	}
	return transportFor(b.cfg.transport, l.cfg.runtime, b.knownRuntimes().Default), nil
}

// knownRuntimes returns the daemon's runtimes as last asked.
func (b *Backend) knownRuntimes() RuntimeSet {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runtimes
}

// listenForRelay makes p's relay socket in its state directory, before the
// container starts; the undo list closes it.
func (b *Backend) listenForRelay(l *launch, p *Placement) error {
	h, err := listenRelay(l.sockDir, b.cfg.chown, b.cfg.UID, b.cfg.GID, l.log)
	if err != nil {
		return err
	}
	p.relay = h
	l.undo.Add("close relay socket", func(context.Context) error { h.close(); return nil })
	return nil
}

// awaitRelay starts the relay in the started container and waits until the
// server answers through it, then watches the relay and finds the container's
// OOM-kill counter as awaitReady does.
func (b *Backend) awaitRelay(ctx context.Context, l *launch, p *Placement) error {
	maxConns := 0
	if rules := l.spec.Template.Network; rules != nil {
		maxConns = rules.Policy().MaxConns
	}
	if err := b.startRelay(ctx, p.id, l.spec.Template.Network != nil, maxConns); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return b.startError(p.id, l.name, err)
	}
	pid, err := b.waitRelay(ctx, p.id, p.relay, l.token)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, errExited) {
			return err
		}
		return b.startError(p.id, l.name, err)
	}
	p.pid = pid
	p.server.Endpoint.Dial = p.relay.dial
	p.ready.Store(true)
	p.watchExit()
	p.watchRelay()
	p.findOOMCounter(l.log)
	return nil
}

// waitRelay waits until the relay has connected and the server answers through
// it, the container stops, or the ready timeout (or ctx) ends; it returns the
// container's main pid as the daemon reports it (under gVisor, the sandbox's).
func (b *Backend) waitRelay(ctx context.Context, id string, h *relayHost, token string) (int, error) {
	deadline := time.Now().Add(b.cfg.readyTimeout)
	hc := &http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return h.dial(ctx) },
		DisableKeepAlives: true,
	}}
	defer hc.CloseIdleConnections()
	var (
		pid         int
		lastErr     = errors.New("the relay has not connected yet")
		nextInspect time.Time
	)
	for {
		if now := time.Now(); !now.Before(nextInspect) {
			r, err := b.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
			if err != nil {
				return 0, fmt.Errorf("inspect container: %w", err)
			}
			if st := r.Container.State; st == nil || !st.Running {
				return 0, errExited
			} else {
				pid = st.Pid
			}
			nextInspect = now.Add(pollContainer)
		}
		select {
		case <-h.ready:
			if lastErr = probe(ctx, hc, token); lastErr == nil {
				return pid, nil
			}
		case <-h.gone:
			return 0, errRelayGone
		default:
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("jupyter server not ready through the relay after %s: %v", b.cfg.readyTimeout, lastErr)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(pollSocket):
		}
	}
}

// watchRelay loses p (its session is told, and its next call gets a new
// container) once its relay is gone while the container still runs: killed or
// exited in the container.
func (p *Placement) watchRelay() {
	h := p.relay
	go func() {
		select {
		case <-h.Gone():
			if p.closing.Load() {
				return // kernelbox removed the container
			}
			p.relayLost.Store(true)
			name, session := p.names()
			p.b.cfg.log.Warn("the relay to the container's server is gone (killed in the container?); the session gets a new container",
				"session", session, "container", dockerapi.Short(p.id), "name", name)
			p.lose(-1)
		case <-h.closed:
		}
	}()
}

// findOOMCounter finds the container's OOM-kill counter from its pid.
func (p *Placement) findOOMCounter(log interface{ Info(string, ...any) }) {
	f, err := oomCounterFile(p.pid, p.id)
	if err != nil {
		log.Info("OOM kills will be counted from docker events", "reason", err)
		return
	}
	if n, err := readOOMKills(f); err == nil {
		p.mu.Lock()
		p.oomFile, p.oomSeen = f, n
		p.mu.Unlock()
	}
}

// egressListen listens for the session's egress proxy: on the container's own
// /tmp through its root (the pinned transport), or, with the relay, in its state
// directory, where the relay's forwarder connects (no socket in a gVisor sandbox is
// reachable from the host, and no host path outside its mounts from the sandbox).
// The state directory is kernelbox's (0700, or 0755 under a 0700 root), mounted
// into this container only, so the socket's mode 0666 (startEgress) opens it to
// this container's kernel alone.
func (b *Backend) egressListen(p *Placement, root string) (net.Listener, error) {
	path := egressPath(p, root)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("egress: listen for the container: %w", err)
	}
	return ln, nil
}

// egressPath is where the session's egress proxy listens (egressListen).
func egressPath(p *Placement, root string) string {
	if p.relay != nil {
		return filepath.Join(p.sockDir, egressSocketName)
	}
	return root + egressSocket
}

// reattachRelay takes back a kept container reached through its relay: it
// listens again on the relay's socket in the container's state directory and
// waits, up to the ready timeout, until the relay (which retries every second at
// most) has connected and the server answers with the kept token.
func (b *Backend) reattachRelay(ctx context.Context, k keptContainer, pid int, fail func(string) executor.Reattached) executor.Reattached {
	log := b.cfg.log.With("session", k.Session, "container", dockerapi.Short(k.ID))
	h, err := listenRelay(k.SockDir, b.cfg.chown, b.cfg.UID, b.cfg.GID, log)
	if err != nil {
		return fail("listen for its relay: " + err.Error())
	}
	if _, err := b.waitRelay(ctx, k.ID, h, k.Token); err != nil {
		h.close()
		return fail("its relay did not connect again: " + err.Error())
	}
	p := b.keptPlacement(k, pid, nil, h)
	b.adoptPlacement(p)
	log.Info("container adopted (relay)", "name", k.Name)
	p.nameAfterSession(ctx)
	return executor.Reattached{Session: k.Session, Placement: p}
}

// sockPath is fdPath of a pinned socket, or "" for none (the relay transport).
func sockPath(f *os.File) string {
	if f == nil {
		return ""
	}
	return fdPath(f)
}
