package swarm

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/sessionproxy"
	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
)

// A template's network allowlist (executor.Template.Network) keeps the task on its
// internal overlay alone, with no default route and no resolver: the only thing it
// reaches beyond itself is kernelbox's container, which is attached to every
// session's overlay. kernelbox listens there, on its own address on that session's
// overlay (proxyPort), one listener per session: only that session's task can reach
// the address (another session's task has no route to this overlay), so the
// listener names the session. The proxy resolves names and dials, after its
// checks, from kernelbox's container's other networks.

// proxyPort is the egress proxy's port on kernelbox's address on a session's
// overlay.
const proxyPort = 3128

// startEgress, for a template with an allowlist, attaches kernelbox's container to
// the session's network before the service exists (the kernel's environment names
// the proxy's address there), listens on that address, and sets the proxy
// variables in the task's environment.
func (b *Backend) startEgress(ctx context.Context, l *launch, rules *egress.Rules) error {
	if err := b.attach(ctx, l.obj.network, l.obj.name, netip.Addr{}); err != nil {
		return err
	}
	addr, err := b.selfAddr(ctx, l.obj.network)
	if err != nil {
		return err
	}
	ap := netip.AddrPortFrom(addr, proxyPort)
	ic, err := b.prepareSecrets(ctx, l, rules)
	if err != nil {
		return err
	}
	// Not l.log, which names the session as opened (a warm pool's placeholder):
	// the proxy names it in each line, Adopt's id once taken.
	px, err := b.listenEgress(ap, rules, ic, l.obj.session, l.warm, b.cfg.log.With("service", l.obj.name))
	if err != nil {
		return err
	}
	l.egress, l.proxy = px, ap
	l.undo.Add("stop egress proxy", func(context.Context) error { px.Close(); return nil })
	l.cfg.Env = append(slices.Clone(l.cfg.Env), sessionproxy.Env("http://"+ap.String())...)
	return nil
}

// listenEgress serves a session's proxy on ap, kernelbox's address on its
// overlay; ic adds rules' secrets (nil: none are added).
func (b *Backend) listenEgress(ap netip.AddrPort, rules *egress.Rules, ic *egress.Intercept, session string, warm bool, log *slog.Logger) (*sessionproxy.Proxy, error) {
	ln, err := net.Listen("tcp", ap.String())
	if err != nil {
		return nil, fmt.Errorf("egress: listen on the session's network: %w", err)
	}
	return sessionproxy.Start(ln, sessionproxy.Options{Rules: rules, Session: session, Warm: warm, TestHosts: b.cfg.egressTestHosts,
		Logger: log, Budgets: b.budgets, Limiter: b.cfg.egressLimiter, Intercept: ic})
}

// attach connects kernelbox's container to a session's network, at addr when it
// is valid (an adopted session's proxy address).
func (b *Backend) attach(ctx context.Context, id, name string, addr netip.Addr) error {
	opts := client.NetworkConnectOptions{Container: b.cfg.self}
	if addr.IsValid() {
		opts.EndpointConfig = &network.EndpointSettings{IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: addr}}
	}
	if _, err := b.api.NetworkConnect(ctx, id, opts); err != nil {
		return fmt.Errorf("attach %s to network %s: %w", b.cfg.self, name, err)
	}
	return nil
}

// selfAddr returns kernelbox's container's address on network id.
func (b *Backend) selfAddr(ctx context.Context, id string) (netip.Addr, error) {
	self, err := b.api.ContainerInspect(ctx, b.cfg.self, client.ContainerInspectOptions{})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("inspect own container: %w", err)
	}
	if ns := self.Container.NetworkSettings; ns != nil {
		for _, ep := range ns.Networks {
			if ep != nil && ep.NetworkID == id && ep.IPAddress.IsValid() {
				return ep.IPAddress, nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("own container %s has no address on the session's network", b.cfg.self)
}

// readopt serves an adopted session's proxy again, on the address its task's
// environment names: kernelbox's container must have that address on the
// session's network (the same container, started again, or a new one attached
// at that address by rejoin); otherwise the kernel could not reach the proxy and
// the session is not adopted.
func (b *Backend) readopt(ctx context.Context, p *Placement, k keptService) error {
	rules, err := egress.Compile(*k.Egress) // checked by keptService.check
	if err != nil {
		return fmt.Errorf("its network allowlist: %w", err)
	}
	ap, _ := netip.ParseAddrPort(k.Proxy)
	have, err := b.selfAddr(ctx, k.Network)
	if err != nil {
		return err
	}
	if have != ap.Addr() {
		return fmt.Errorf("its kernel's proxy is at %s, but kernelbox's address on the session's network is now %s", ap.Addr(), have)
	}
	// No secrets: their CA died with the process that made the bundle the
	// kernel trusts (secrets.go).
	px, err := b.listenEgress(ap, rules, nil, k.Session, false, b.cfg.log.With("service", k.Name))
	if err != nil {
		return err
	}
	p.egress, p.proxy, p.rules = px, ap, rules
	return nil
}

// TakeNetwork reports the proxy connections that ended since the last call
// (executor.NetworkReporter); nothing without an allowlist.
func (p *Placement) TakeNetwork() executor.NetworkReport { return p.egress.Take() }

var _ executor.NetworkReporter = (*Placement)(nil)
