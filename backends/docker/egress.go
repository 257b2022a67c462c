package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
	"github.com/kernelbox/kernelbox/backends/internal/sessionproxy"
	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
)

// A template's network allowlist (executor.Template.Network) keeps the container on
// --network none, with only lo. On runc kernelbox listens for the session's proxy
// on the container's 127.0.0.1:egressPort itself, a socket it makes in the
// container's network namespace (egressns.go). Where it cannot enter that
// namespace, and under gVisor, it listens on a unix socket on the container's own
// /tmp tmpfs (reached from the host through the container's root as the server's
// socket is, pinServerSocket) or beside the relay's socket, and a forwarder in
// the container (its own docker exec, or the relay's child) carries
// 127.0.0.1:egressPort to it. The kernel has the proxy variables set and no route
// and no resolver: the proxy resolves names and dials, after its checks, from
// kernelbox's own network.
const (
	// egressSocket is the proxy's socket in the container.
	egressSocket = "/tmp/.kernelbox-egress.sock"
	// egressPort is the kernel's proxy port on the container's loopback.
	egressPort = 3128
	// egressReadyTimeout bounds the wait for the forwarder.
	egressReadyTimeout = 15 * time.Second
	// forwarderSpare is how many connections past the session's max_conns the
	// forwarder carries at once, so that one past the limit still gets the
	// proxy's refusal (a 403) instead of waiting in the listen queue.
	forwarderSpare = 16
	// forwarderMaxChildren bounds the forwarder's processes whatever max_conns
	// says (one socat process per connection, each counted by the container's
	// pids limit); past it new connections wait in the listen queue (128).
	forwarderMaxChildren = 256
	// forwarderBuffer is socat's copy size: its default, 8 KiB, costs a system
	// call pair per 8 KiB of a download.
	forwarderBuffer = 256 << 10
	// forwarderHalfClose is how long, in seconds, a connection goes on after
	// one side closed for writing (socat's default is 0.5 s; the Python
	// forwarder had no bound: the proxy's idle timeout ends it first).
	forwarderHalfClose = 3600
)

// The forwarder is Debian's socat from the kernel image (recipe 4), run as the
// kernel's user: it listens on the container's loopback (egressPort) and forks
// one process per connection that copies between it and the proxy's socket in
// the kernel (read and write of 256 KiB), never through an interpreter. Until
// recipe 4 it was a Python asyncio program, which kept 36-47 % of the host's
// direct rate for a kernel's download; docs/network.md#measured.

// forwarderCmd is the forwarder's command line for a session whose proxy
// allows maxConns connections at once, carrying the container's loopback port
// to the proxy's socket at sock.
func forwarderCmd(maxConns int, sock string) []string {
	children := min(maxConns+forwarderSpare, forwarderMaxChildren)
	return []string{"socat", "-b" + strconv.Itoa(forwarderBuffer), "-t" + strconv.Itoa(forwarderHalfClose),
		"TCP4-LISTEN:" + strconv.Itoa(egressPort) + ",bind=127.0.0.1,reuseaddr,fork,backlog=128,max-children=" + strconv.Itoa(children),
		"UNIX-CONNECT:" + sock}
}

// proxyEnv is what the kernel's environment gets for an allowlist.
func proxyEnv() []string {
	return sessionproxy.Env("http://127.0.0.1:" + strconv.Itoa(egressPort))
}

// startEgress starts a session's proxy and the kernel's way to it, when its
// template has an allowlist. It runs once the server is ready (the container's
// pid is known) and before any kernel, so only the image's own server has run in
// the container when the listener or the socket is made. On runc the proxy
// listens on the container's loopback itself (egressns.go); where it cannot,
// and under gVisor, on a socket that a forwarder or the relay carries the
// kernel's port to.
func (b *Backend) startEgress(ctx context.Context, l *launch, p *Placement) error {
	rules := l.spec.Template.Network
	if rules == nil {
		return nil
	}
	if p.relay == nil {
		ln, err := b.listenEgressNetns(p.pid, p.sockDev, p.sockIno)
		if err == nil {
			if err := b.serveEgress(l, p, ln); err != nil { // no forwarder
				return err
			}
			if rules.Secrets() == nil {
				p.egressKept = rules // the next process can listen there again
			}
			return nil
		}
		if !errors.Is(err, errNoNetns) {
			return err
		}
		b.noNetns.Do(func() {
			b.cfg.log.Warn("egress: kernels reach their proxy through a forwarder (socat) in the container, slower than a listener in its network namespace", "reason", err)
		})
	}
	root := "/proc/" + strconv.Itoa(p.pid) + "/root"
	ln, err := b.egressListen(p, root) // in the container, or beside the relay's socket
	if err != nil {
		return err
	}
	// Never unlink by path on close: by then the pid may name another process,
	// even another session's container. The socket goes with the container's tmpfs.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	// The kernel's user connects; the socket is on the container's tmpfs, where
	// nothing outside this container can reach it.
	if err := os.Chmod(egressPath(p, root), 0o666); err != nil {
		ln.Close()
		return fmt.Errorf("egress: %w", err)
	}
	if err := b.serveEgress(l, p, ln); err != nil {
		return err
	}
	if p.relay != nil {
		return nil // the relay forwards the kernel's proxy port (relayprog.go)
	}
	ex, err := b.startForwarder(ctx, p.id, rules.Policy().MaxConns)
	if err != nil {
		return err
	}
	return b.waitForwarder(ctx, p.pid, ex, egressReadyTimeout)
}

// serveEgress starts the session's proxy on ln, which it owns from then on.
func (b *Backend) serveEgress(l *launch, p *Placement, ln net.Listener) error {
	rules := l.spec.Template.Network
	ic, err := b.intercept(rules)
	if err != nil {
		ln.Close()
		return err
	}
	e, err := b.startProxy(ln, rules, ic, l.spec.ID, l.spec.Warm, p.id)
	if err != nil {
		return err
	}
	p.egress = e
	l.undo.Add("stop egress proxy", func(context.Context) error { e.Close(); return nil })
	return nil
}

// startProxy serves the proxy of session (a warm pool's placeholder when warm)
// in container id on ln, which it owns from then on.
func (b *Backend) startProxy(ln net.Listener, rules *egress.Rules, ic *egress.Intercept, session string, warm bool, id string) (*sessionproxy.Proxy, error) {
	return sessionproxy.Start(ln, sessionproxy.Options{
		Rules: rules, Session: session, Warm: warm, TestHosts: b.cfg.egressTestHosts,
		// Not the launch's logger, which names the session as it was opened (a
		// warm pool's placeholder): the proxy names it in each line, Adopt's id
		// once taken.
		Logger:  b.cfg.log.With("container", dockerapi.Short(id)),
		Budgets: b.budgets, Limiter: b.cfg.egressLimiter, Intercept: ic,
	})
}

// readoptEgress listens again, for a container a restarted kernelbox takes
// back, in its network namespace and serves its session's proxy there. If the
// port was taken meanwhile (the kernel bound it while no kernelbox listened),
// the container is not taken back: what answers on it is not the proxy.
func (b *Backend) readoptEgress(pid int, k keptContainer) (*sessionproxy.Proxy, *egress.Rules, error) {
	rules, err := egress.Compile(*k.Policy) // checked by keptContainer.check
	if err != nil {
		return nil, nil, fmt.Errorf("its network allowlist: %w", err)
	}
	ln, err := b.listenEgressNetns(pid, k.SockDev, k.SockIno)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, nil, fmt.Errorf("its kernel's proxy port %d was taken while kernelbox was not running: %w", egressPort, err)
	}
	if err != nil {
		return nil, nil, err
	}
	px, err := b.startProxy(ln, rules, nil, k.Session, false, k.ID)
	if err != nil {
		return nil, nil, err
	}
	return px, rules, nil
}

// startForwarder runs the forwarder in the container as the kernel's user and
// returns its exec's id.
func (b *Backend) startForwarder(ctx context.Context, id string, maxConns int) (string, error) {
	ex, err := b.api.ExecCreate(ctx, id, client.ExecCreateOptions{
		User: strconv.Itoa(b.cfg.UID) + ":" + strconv.Itoa(b.cfg.GID),
		Cmd:  forwarderCmd(maxConns, egressSocket),
	})
	if err != nil {
		return "", fmt.Errorf("egress: create forwarder: %w", err)
	}
	if _, err := b.api.ExecStart(ctx, ex.ID, client.ExecStartOptions{Detach: true}); err != nil {
		return "", fmt.Errorf("egress: start forwarder (socat, in kernel images of recipe 4: `kernelbox image build` rebuilds older ones): %w", err)
	}
	return ex.ID, nil
}

// waitForwarder waits until the container of init pid listens on egressPort
// (read from its network namespace's /proc/<pid>/net/tcp: nothing connects to
// find out), failing at once if the forwarder's exec has ended.
func (b *Backend) waitForwarder(ctx context.Context, pid int, execID string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tcp := "/proc/" + strconv.Itoa(pid) + "/net/tcp"
	for i := 0; ; i++ {
		ok, err := listening(tcp, egressPort)
		if err != nil {
			return fmt.Errorf("egress: %w", err)
		}
		if ok {
			return nil
		}
		if i%10 == 9 { // about every 50 ms: has it failed?
			in, err := b.api.ExecInspect(ctx, execID, client.ExecInspectOptions{})
			if err == nil && !in.Running && in.PID != 0 {
				return fmt.Errorf("egress: the forwarder (socat) exited with code %d before it listened", in.ExitCode)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("egress: the forwarder did not listen within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// listening reports whether tcp (a /proc/<pid>/net/tcp) has a socket listening
// on 127.0.0.1:port or on any address's port.
func listening(tcp string, port int) (bool, error) {
	b, err := os.ReadFile(tcp)
	if err != nil {
		return false, err
	}
	p := fmt.Sprintf(":%04X", port)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != "0A" { // 0A: TCP_LISTEN
			continue
		}
		if a, ok := strings.CutSuffix(f[1], p); ok && (a == "0100007F" || a == "00000000") {
			return true, nil
		}
	}
	return false, nil
}

// TakeNetwork reports the proxy connections that ended since the last call
// (executor.NetworkReporter); nothing without an allowlist.
func (p *Placement) TakeNetwork() executor.NetworkReport { return p.egress.Take() }

// EgressStats returns the placement's proxy counters, and false without an
// allowlist.
func (p *Placement) EgressStats() (egress.Stats, bool) { return p.egress.Stats() }

var _ executor.NetworkReporter = (*Placement)(nil)
