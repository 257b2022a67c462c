package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
	"github.com/kernelbox/kernelbox/backends/internal/sessionproxy"
	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
)

// A template's network allowlist (executor.Template.Network) keeps the container on
// --network none, with only lo: kernelbox listens on a unix socket on the
// container's own /tmp tmpfs, reached from the host through the container's root
// as the server's socket is (pinServerSocket), and a forwarder started in the
// container with docker exec carries 127.0.0.1:egressPort to it. The kernel has the
// proxy variables set and no route and no resolver: the proxy resolves names and
// dials, after its checks, from kernelbox's own network.
const (
	// egressSocket is the proxy's socket in the container.
	egressSocket = "/tmp/.kernelbox-egress.sock"
	// egressReady is written by the forwarder once it listens.
	egressReady = "/tmp/.kernelbox-egress.ready"
	// egressPort is the forwarder's port on the container's loopback.
	egressPort = 3128
	// egressReadyTimeout bounds the wait for the forwarder.
	egressReadyTimeout = 15 * time.Second
)

// forwarder is the program the container runs (as the kernel's user) to carry its
// loopback port (egressPort) to the proxy's socket: one asyncio loop, no thread
// per connection (a thread pair cost about 3 ms per new connection), so its
// connections are bounded by the proxy's max_conns.
const forwarder = `import asyncio, socket
S = "` + egressSocket + `"
async def pipe(r, w):
    try:
        while True:
            d = await r.read(262144)
            if not d:
                break
            w.write(d)
            await w.drain()
        w.write_eof()
    except OSError:
        pass
async def handle(cr, cw):
    try:
        ur, uw = await asyncio.open_unix_connection(S)
    except OSError:
        cw.close()
        return
    await asyncio.gather(pipe(cr, uw), pipe(ur, cw))
    cw.close()
    uw.close()
async def main():
    srv = await asyncio.start_server(handle, "127.0.0.1", 3128, backlog=128, reuse_address=True)
    open("` + egressReady + `", "w").close()
    await srv.serve_forever()
asyncio.run(main())
`

// proxyEnv is what the kernel's environment gets for an allowlist.
func proxyEnv() []string {
	return sessionproxy.Env("http://127.0.0.1:" + strconv.Itoa(egressPort))
}

// startEgress starts a session's proxy on its socket in the container and the
// forwarder beside the kernel, when its template has an allowlist. It runs once
// the server is ready (the container's pid is known) and before any kernel, so
// only the image's own server has run in the container when the socket is bound.
func (b *Backend) startEgress(ctx context.Context, l *launch, p *Placement) error {
	rules := l.spec.Template.Network
	if rules == nil {
		return nil
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
	ic, err := b.intercept(rules)
	if err != nil {
		ln.Close()
		return err
	}
	e, err := sessionproxy.Start(ln, sessionproxy.Options{
		Rules: rules, Session: l.spec.ID, Warm: l.spec.Warm, TestHosts: b.cfg.egressTestHosts,
		// Not l.log, which names the session as it was opened (a warm pool's
		// placeholder): the proxy names it in each line, Adopt's id once taken.
		Logger:  b.cfg.log.With("container", dockerapi.Short(p.id)),
		Budgets: b.budgets, Limiter: b.cfg.egressLimiter, Intercept: ic,
	})
	if err != nil {
		return err
	}
	p.egress = e
	l.undo.Add("stop egress proxy", func(context.Context) error { e.Close(); return nil })
	if p.relay != nil {
		return nil // the relay forwards the kernel's proxy port (relayprog.go)
	}
	if err := b.startForwarder(ctx, p.id); err != nil {
		return err
	}
	return waitFile(ctx, root+egressReady, egressReadyTimeout)
}

// startForwarder runs the forwarder in the container as the kernel's user.
func (b *Backend) startForwarder(ctx context.Context, id string) error {
	ex, err := b.api.ExecCreate(ctx, id, client.ExecCreateOptions{
		User: strconv.Itoa(b.cfg.UID) + ":" + strconv.Itoa(b.cfg.GID),
		Cmd:  []string{b.cfg.Python, "-c", forwarder},
	})
	if err != nil {
		return fmt.Errorf("egress: create forwarder: %w", err)
	}
	if _, err := b.api.ExecStart(ctx, ex.ID, client.ExecStartOptions{Detach: true}); err != nil {
		return fmt.Errorf("egress: start forwarder: %w", err)
	}
	return nil
}

// waitFile waits until path exists.
func waitFile(ctx context.Context, path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Lstat(path); err == nil {
			return nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("egress: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("egress: the forwarder did not listen within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TakeNetwork reports the proxy connections that ended since the last call
// (executor.NetworkReporter); nothing without an allowlist.
func (p *Placement) TakeNetwork() executor.NetworkReport { return p.egress.Take() }

// EgressStats returns the placement's proxy counters, and false without an
// allowlist.
func (p *Placement) EgressStats() (egress.Stats, bool) { return p.egress.Stats() }

var _ executor.NetworkReporter = (*Placement)(nil)
