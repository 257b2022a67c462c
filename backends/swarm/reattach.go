package swarm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
	"github.com/kernelbox/kernelbox/backends/internal/keep"
	"github.com/kernelbox/kernelbox/backends/internal/kernelfiles"
	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/kernelfs"
)

var _ executor.Reattacher = (*Backend)(nil)

// reattachProbe bounds the check that a kept service's server answers.
const reattachProbe = 10 * time.Second

// Reattach takes back the services the state file (Options.StateFile) listed when
// New read it: each whose service still exists with this deployment's labels,
// whose task still runs on a ready node at the kept address, and whose server
// answers with the kept token and still has a kernel becomes a Placement again,
// as Open would have returned it (kernelbox's container is attached to its
// network again when it is not). The others are removed with their network and
// secret and returned with Lost saying why. Without a state file, or with one
// that could not be read (the error says why), it returns none. It is called
// once; the state file is rewritten with what was taken back.
func (b *Backend) Reattach(ctx context.Context) ([]executor.Reattached, error) {
	kept, err := b.kept.Take()
	if err != nil {
		return nil, fmt.Errorf("reattach services: %w", err)
	}
	if kept == nil || kept.Instance != b.instance || len(kept.Services) == 0 {
		return nil, nil
	}
	attached, nodes, err := b.reattachFacts(ctx)
	if err != nil {
		b.cfg.log.Warn("reattach services: the manager did not answer; each is checked on its own", "err", err)
	}
	out := keep.Reattach(ctx, kept.Services, keep.DefaultAtOnce, func(ctx context.Context, k keptService) executor.Reattached {
		return b.reattachOne(ctx, k, attached, nodes)
	})
	b.saveKept()
	b.watch()
	return out, nil
}

// reattachFacts returns the networks kernelbox's container is attached to and the
// swarm's nodes by id.
func (b *Backend) reattachFacts(ctx context.Context) (map[string]bool, map[string]swarm.Node, error) {
	attached := map[string]bool{}
	nodes := map[string]swarm.Node{}
	self, err := b.api.ContainerInspect(ctx, b.cfg.self, client.ContainerInspectOptions{})
	if err != nil {
		return attached, nodes, fmt.Errorf("inspect own container: %w", err)
	}
	if ns := self.Container.NetworkSettings; ns != nil {
		for _, ep := range ns.Networks {
			if ep != nil {
				attached[ep.NetworkID] = true
			}
		}
	}
	list, err := b.api.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return attached, nodes, fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range list.Items {
		nodes[n.ID] = n
	}
	return attached, nodes, nil
}

// reattachOne takes back one kept service, or removes it and says why not.
func (b *Backend) reattachOne(ctx context.Context, k keptService, attached map[string]bool, nodes map[string]swarm.Node) executor.Reattached {
	r := executor.Reattached{Session: k.Session}
	t0 := time.Now()
	p := b.keptPlacement(ctx, k)
	log := b.cfg.log.With("session", k.Session, "service", k.Name)
	fail := func(why string) executor.Reattached {
		err := p.close(ctx)
		log.Warn("kept service not adopted; removed", "reason", why, "err", err)
		r.Lost = why
		return r
	}
	svc, err := b.api.ServiceInspect(ctx, k.Service, client.ServiceInspectOptions{})
	if err != nil {
		if dockerapi.IsNotFound(err) {
			return fail(fmt.Sprintf("its service %s was removed while kernelbox was not running", k.Name))
		}
		return fail("inspect its service: " + err.Error())
	}
	l := svc.Service.Spec.Labels
	if svc.Service.Spec.Name != k.Name || l[LabelCreatedBy] != sandbox.CreatedBy || l[LabelOwner] != b.cfg.owner ||
		l[LabelInstance] != b.instance || (l[LabelSession] != k.Session && !strings.HasPrefix(l[LabelSession], ".warm-")) {
		return fail(fmt.Sprintf("service %s is not the one the state file describes (its labels differ)", k.Name))
	}
	tasks, err := b.api.TaskList(ctx, client.TaskListOptions{Filters: make(client.Filters).Add("service", k.Service)})
	if err != nil {
		return fail("list its service's tasks: " + err.Error())
	}
	byID := map[string]swarm.Task{}
	for _, t := range tasks.Items {
		byID[t.ID] = t
	}
	if len(nodes) > 0 {
		if why := lossReason(p, byID, nodes); why != "" {
			return fail(why + " (seen while kernelbox was starting again)")
		}
	}
	if why := taskAddr(byID[k.Task], k.Network, p.addr.Addr()); why != "" {
		return fail(why)
	}
	tJoin := time.Now()
	if err := b.rejoin(ctx, k, attached[k.Network]); err != nil {
		return fail(err.Error())
	}
	joined := time.Since(tJoin)
	if err := probeKept(ctx, p.server.Endpoint); err != nil {
		return fail(err.Error())
	}
	if k.Egress != nil {
		if err := b.readopt(ctx, p, k); err != nil {
			return fail("its network allowlist's proxy: " + err.Error())
		}
	}
	if !b.track(p) {
		return fail("kernelbox is stopping")
	}
	log.Info("service adopted", "node", p.node, "addr", p.addr, "elapsed", time.Since(t0).Round(time.Millisecond),
		"attach", joined.Round(time.Millisecond), "attached_already", attached[k.Network])
	r.Placement = p
	return r
}

// keptPlacement makes the Placement of a kept service, not yet tracked.
func (b *Backend) keptPlacement(ctx context.Context, k keptService) *Placement {
	addr, _ := netip.ParseAddrPort(k.Addr) // checked by keptService.check
	p := &Placement{
		b: b, obj: sessionObjects{name: k.Name, session: k.Session, network: k.Network, secret: k.Secret},
		service: k.Service, task: k.Task, nodeID: k.Node, node: b.nodeName(ctx, k.Node),
		addr: addr, started: k.Started, workSize: k.WorkSize,
		server: executor.Server{
			Endpoint:   jupyter.Endpoint{URL: "http://" + addr.String(), Token: k.Token},
			KernelName: k.Kernel,
		},
	}
	p.Files = kernelfiles.New(kernelfs.Options{Logger: b.cfg.log.With("session", k.Session, "service", k.Name)}, k.WorkSize, &p.loss)
	return p
}

// taskAddr says why task t is not the kept one at addr on network, or "".
func taskAddr(t swarm.Task, network string, addr netip.Addr) string {
	if t.ID == "" {
		return "its service's task is gone"
	}
	for _, na := range t.NetworksAttachments {
		if na.Network.ID != network {
			continue
		}
		for _, a := range na.Addresses {
			if a.Addr() == addr {
				return ""
			}
		}
	}
	return fmt.Sprintf("its task no longer has the address %s on the session's network", addr)
}

// rejoin records the session network's subnet (SessionNetwork) and attaches
// kernelbox's container to it unless it is attached already (the same container,
// started again, keeps its networks; a new one has none), at the address of the
// session's egress proxy when it has one (the task's environment names it).
func (b *Backend) rejoin(ctx context.Context, k keptService, attached bool) error {
	nw, err := b.api.NetworkInspect(ctx, k.Network, client.NetworkInspectOptions{})
	if err != nil {
		if dockerapi.IsNotFound(err) {
			return fmt.Errorf("its network %s was removed while kernelbox was not running", k.Name)
		}
		return fmt.Errorf("inspect its network: %w", err)
	}
	for _, c := range nw.Network.IPAM.Config {
		if c.Subnet.IsValid() {
			b.mu.Lock()
			b.subnets[k.Network] = c.Subnet
			b.mu.Unlock()
			break
		}
	}
	if attached {
		return nil
	}
	proxy, _ := netip.ParseAddrPort(k.Proxy) // "" for none; checked by keptService.check
	return b.attach(ctx, k.Network, k.Name, proxy.Addr())
}

// probeKept checks that a kept server answers with its kept token (listing its
// kernels needs it) and still has a kernel; the executor then finds its own.
func probeKept(ctx context.Context, ep jupyter.Endpoint) error {
	ctx, cancel := context.WithTimeout(ctx, reattachProbe)
	defer cancel()
	c, err := jupyter.NewClient(ep, &jupyter.ClientOptions{Timeout: reattachProbe})
	if err != nil {
		return err
	}
	defer c.CloseIdle()
	ks, err := c.Kernels(ctx)
	if err != nil {
		return fmt.Errorf("its server does not answer with the kept token: %w", err)
	}
	if len(ks) == 0 {
		return errors.New("its server has no kernel any more")
	}
	return nil
}

// Detach ends the backend without removing its session services: the state file
// keeps them for the next backend with the same StateFile and Owner, which takes
// them back (Reattach). Opens in flight are aborted; services that cannot be taken
// back later (a warm pool's, a lost one) are removed, and so is everything else
// of this instance that no kept service uses. The backend is closed after it.
// Without a StateFile, or with nothing to keep, it is Close.
func (b *Backend) Detach(ctx context.Context) error {
	if b.cfg.stateFile == "" {
		return b.Close(ctx)
	}
	if !b.shut() {
		return nil
	}
	all := b.placementList()
	if !slices.ContainsFunc(all, keeper{}.Keep) {
		return b.closeAll(ctx)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	kept, errs := keep.Detach(ctx, all, keeper{}, &b.keptFile, b.writeKept)
	b.leaveNetworks(ctx, kept)
	held := map[string]bool{}
	for _, c := range append([]keptConfig{{ID: b.launcher.id}, {ID: b.kernelspec.id}, {ID: b.resolv.id}}, b.oldConfigs...) {
		held[c.ID] = true
	}
	for _, p := range kept {
		held[p.service], held[p.obj.network], held[p.obj.secret] = true, true, true
	}
	_, err := b.removeOwned(ctx, func(id string, labels map[string]string) bool { return b.mine(id, labels) && !held[id] })
	keep.Unlock(b.stateLock)
	removed := len(errs)
	errs = append(errs, err, b.api.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("detach swarm backend: %w", err)
	}
	b.cfg.log.Info("swarm backend detached: its services are kept for the next start", "kept", len(kept), "removed", removed)
	return nil
}

// leaveNetworks disconnects kernelbox's own container from the kept sessions'
// networks, which the next start joins again as it takes them back (rejoin). Left
// attached, the same container could not be started again where it was the
// node's only one on such a network: Docker removes an overlay network from a
// node with its last container there, and then refuses to start the stopped
// container ("network … not found"). A failure is logged: the next start then
// finds it attached.
func (b *Backend) leaveNetworks(ctx context.Context, kept []*Placement) {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, p := range kept {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, err := b.api.NetworkDisconnect(ctx, p.obj.network, client.NetworkDisconnectOptions{Container: b.cfg.self, Force: true})
			if err != nil && !dockerapi.IsNotFound(err) {
				b.cfg.log.Warn("leave a kept session's network", "session", p.obj.session, "network", p.obj.name, "err", err)
			}
		})
	}
	wg.Wait()
}

// keeper is what Detach does with each placement (keep.Keeper).
type keeper struct{}

// Keep: a live session's service (not a warm pool's, not closed or lost) can be
// taken back.
func (keeper) Keep(p *Placement) bool {
	_, ok := p.record()
	return ok
}

// Drop removes the service with its network and secret.
func (keeper) Drop(ctx context.Context, p *Placement) error { return p.close(ctx) }

// Release lets go of the service without removing it (a later Close of the
// placement does nothing), and stops its egress proxy: the backend that adopts
// the session serves it again.
func (keeper) Release(p *Placement) {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.egress.Close()
}
