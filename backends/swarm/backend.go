package swarm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
	"github.com/kernelbox/kernelbox/backends/internal/keep"
	"github.com/kernelbox/kernelbox/backends/internal/sessionproxy"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/serverflags"
)

// teardownTimeout bounds Close and Placement.Close, which run under their own
// context so that a cancelled caller cannot leave services behind.
const teardownTimeout = 60 * time.Second

// ErrClosed is returned by [Backend.Open] after [Backend.Close].
var ErrClosed = errors.New("swarm backend is closed")

// ErrNoNewPrivileges means a node's daemon lacks "no-new-privileges": true, which is
// the only way a swarm task gets NoNewPrivs (Engine 20.10 drops the service spec's
// field); the backend refuses to place sessions there.
var ErrNoNewPrivileges = errors.New(`docker daemon lacks "no-new-privileges": true`)

// ErrNotInContainer means kernelbox does not run in a container on the manager's
// daemon, so it cannot join the sessions' overlay networks.
var ErrNotInContainer = errors.New("kernelbox must run in a container on a swarm manager (a host process cannot join an overlay network)")

// swarmConfig is one of the backend's swarm configs, shared by its sessions.
type swarmConfig struct{ id, name string }

// Backend runs each session as a hardened swarm service. Create it with [New]; it is
// safe for concurrent use. Close removes every service, network, secret and config
// it created.
type Backend struct {
	api      swarmAPI
	cfg      config
	instance string

	launcher, kernelspec, resolv swarmConfig

	// gate lets Opens in until Close or Detach, which abort the Opens in flight
	// and the background work (its Life) and wait for them.
	gate     keep.Gate
	watchers sync.WaitGroup // the watch goroutine (watch.go) and the state writer (keep.go)

	mu         sync.Mutex
	watching   bool
	placements map[*Placement]struct{}
	nodes      map[string]string       // node id -> name, as nodeName found them
	subnets    map[string]netip.Prefix // session network id -> its subnet (SessionNetwork)

	// What the state file kept from an earlier process (keep.go): read by New,
	// left for Reattach, and why nothing was when the file was bad.
	keptFile keep.Writes // writes of the state file (keep.go)
	kept     keep.Kept[*keptState]
	// stateLock is held while the backend runs (keep.Lock).
	stateLock *os.File
	keepDirty chan struct{} // keptChanged -> keepLoop
	// oldConfigs are a kept instance's configs that New did not use again
	// (another kernelbox version's, or an earlier process's CA bundle) and this
	// process's CA bundle (secrets.go): kept services may still use them.
	// Changed only at New and through keptFile.
	oldConfigs []keptConfig

	// secrets is the interception CA and its bundle's config, made for the
	// first template with secrets (secrets.go).
	secrets secretsCA

	// budgets are the sessions' egress byte budgets, kept beside the state
	// file (egress.go).
	budgets *sessionproxy.Budgets
}

var (
	_ executor.Backend       = (*Backend)(nil)
	_ executor.HealthChecker = (*Backend)(nil)
	_ executor.SpecApplier   = (*Backend)(nil)
	_ executor.StartLimiter  = (*Backend)(nil)
)

// MaxStarting returns how many sessions may be starting at once (see
// Options.MaxStarting): the executor holds the others back, so a burst comes
// up in turn instead of every start sharing the nodes' CPUs until all are late.
func (b *Backend) MaxStarting() int { return b.cfg.maxStarting }

// Applies reports the template fields this backend applies to a session's
// service: kernel (a kernelspec the image has), image, memory, CPUs, pids, max
// lifetime, environment, a network allowlist (egress.go) and its secrets
// (secrets.go).
func (b *Backend) Applies() executor.SpecFields {
	return executor.SpecFields{Kernel: true, Image: true, Memory: true, CPUs: true, Pids: true, MaxLifetime: true, Env: true, Network: true, Secrets: true}
}

// SyncsFiles reports true: a session's files live in its task's /workspace tmpfs,
// which kernelbox's host never sees, so the session files API goes through the
// kernel (Placement.KernelFiles), as for the remote backend.
func (b *Backend) SyncsFiles() bool { return true }

// New connects to a swarm manager, checks that its daemon sets no-new-privileges and
// that kernelbox runs in a container there, removes what a dead instance of the same
// Options.Owner left, and creates the configs its sessions share.
func New(ctx context.Context, opts Options) (*Backend, error) {
	cfg, err := opts.resolve()
	if err != nil {
		return nil, fmt.Errorf("swarm backend: %w", err)
	}
	api, err := dockerapi.NewClient(cfg.host)
	if err != nil {
		return nil, fmt.Errorf("swarm backend: %w", err)
	}
	b, err := newBackend(ctx, cfg, api)
	if err != nil {
		_ = api.Close()
		return nil, fmt.Errorf("swarm backend: %w", err)
	}
	return b, nil
}

func newBackend(ctx context.Context, cfg config, api swarmAPI) (_ *Backend, err error) {
	b := &Backend{
		api: api, cfg: cfg, instance: uuid.NewString(),
		placements: make(map[*Placement]struct{}), nodes: make(map[string]string),
		subnets: make(map[string]netip.Prefix), keepDirty: make(chan struct{}, 1),
		budgets: sessionproxy.NewBudgets(sessionproxy.BudgetsFile(cfg.stateFile), cfg.log),
	}
	if err := b.checkDaemon(ctx); err != nil {
		return nil, err
	}
	if _, err := api.ContainerInspect(ctx, cfg.self, client.ContainerInspectOptions{}); err != nil {
		if dockerapi.IsNotFound(err) {
			return nil, fmt.Errorf("%w: no container %q on the manager's daemon (set --swarm-self)", ErrNotInContainer, cfg.self)
		}
		return nil, fmt.Errorf("inspect own container %q: %w", cfg.self, err)
	}
	if b.stateLock, err = keep.Lock(cfg.stateFile); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			keep.Unlock(b.stateLock)
		}
	}()
	spare := b.readKept()
	n, err := b.reap(ctx, spare)
	if err != nil {
		cfg.log.Warn("reaping a dead instance's services failed", "err", err)
	}
	if err = b.probeNodes(ctx); err != nil {
		return nil, err
	}
	if cfg.maxStarting == 0 {
		cfg.maxStarting = max(4, 2*b.readyNodes(ctx))
		b.cfg.maxStarting = cfg.maxStarting
	}
	if err = b.createConfigs(ctx); err != nil {
		rctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
		defer cancel()
		// What the state file lists stays for a start that succeeds.
		_, rerr := b.removeOwned(rctx, func(id string, labels map[string]string) bool { return b.mine(id, labels) && !spare[id] })
		return nil, errors.Join(err, rerr)
	}
	if cfg.stateFile != "" {
		b.watchers.Go(b.keepLoop)
	}
	cfg.log.Info("swarm backend ready", "max_starting", cfg.maxStarting, "image", cfg.Image, "owner", cfg.owner, "instance", b.instance, "self", cfg.self, "reaped", n)
	return b, nil
}

// readKept reads the state file (keep.go). When it lists services, the backend
// carries on as the instance that made them and returns the ids of what it
// lists, which the reap spares; otherwise none.
func (b *Backend) readKept() map[string]bool {
	st, skipped, err := readKept(b.cfg.stateFile, b.cfg.owner)
	if err != nil {
		b.cfg.log.Error("the state file cannot be used: no session is adopted, their services are reaped", "err", err)
	}
	for _, why := range skipped {
		b.cfg.log.Error("the state file lists a service it cannot adopt; it is reaped", "reason", why)
	}
	b.kept.Set(st, err)
	if st == nil || len(st.Services) == 0 {
		return nil
	}
	b.instance = st.Instance
	return st.ids()
}

// checkDaemon asks the manager's daemon whether it is an active manager. Whether the
// nodes set no-new-privileges is probed (probe.go): 20.10's info does not say.
func (b *Backend) checkDaemon(ctx context.Context) error {
	if _, err := b.api.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return fmt.Errorf("docker daemon unreachable: %w", err)
	}
	info, err := b.api.Info(ctx, client.InfoOptions{})
	if err != nil {
		return fmt.Errorf("docker info: %w", err)
	}
	if info.Info.Swarm.LocalNodeState != swarm.LocalNodeStateActive || !info.Info.Swarm.ControlAvailable {
		return fmt.Errorf("the daemon at %q is not an active swarm manager (swarm state %q)", b.cfg.host, info.Info.Swarm.LocalNodeState)
	}
	return nil
}

// createConfigs creates the server launcher, the kernelspec and the empty
// resolv.conf as swarm configs of this instance.
func (b *Backend) createConfigs(ctx context.Context) error {
	spec, err := serverflags.KernelSpec(b.cfg.Python)
	if err != nil {
		return err
	}
	// A kept instance's configs are its services' still: one with the same
	// contents (its name ends with their digest) is used again; one of an
	// earlier kernelbox version stays listed until Close.
	have := map[string]string{}
	list, err := b.api.ConfigList(ctx, client.ConfigListOptions{Filters: b.filterOwned(b.instance)})
	if err != nil {
		return fmt.Errorf("list configs: %w", err)
	}
	for _, c := range list.Items {
		have[c.Spec.Name] = c.ID
	}
	mk := func(what string, data []byte) (swarmConfig, error) {
		sum := sha256.Sum256(data)
		name := "kernelbox-" + b.instance[:8] + "-" + what + "-" + hex.EncodeToString(sum[:4])
		if id, ok := have[name]; ok {
			delete(have, name)
			return swarmConfig{id: id, name: name}, nil
		}
		r, err := b.api.ConfigCreate(ctx, client.ConfigCreateOptions{Spec: swarm.ConfigSpec{
			Annotations: swarm.Annotations{Name: name, Labels: b.labels("")}, Data: data,
		}})
		if err != nil {
			return swarmConfig{}, fmt.Errorf("create config %s: %w", name, err)
		}
		return swarmConfig{id: r.ID, name: name}, nil
	}
	if b.launcher, err = mk("launcher", serverflags.Launcher()); err != nil {
		return err
	}
	if b.kernelspec, err = mk("kernelspec", spec); err != nil {
		return err
	}
	if b.resolv, err = mk("resolv", []byte(noResolver)); err != nil {
		return err
	}
	for name, id := range have {
		b.oldConfigs = append(b.oldConfigs, keptConfig{ID: id, Name: name})
	}
	return nil
}

// mine selects this instance's objects.
func (b *Backend) mine(_ string, labels map[string]string) bool {
	return labels[LabelInstance] == b.instance
}

// Name returns "swarm".
func (b *Backend) Name() string { return "swarm" }

// Instance returns the backend's uuid, the LabelInstance of everything it creates.
func (b *Backend) Instance() string { return b.instance }

// Close removes every service this backend created, including those of placements
// not closed and of Opens in flight (which it aborts), then their networks, secrets
// and the shared configs, found by LabelInstance on the manager. It runs under its own
// bounded context. Closing twice is a no-op.
func (b *Backend) Close(ctx context.Context) error {
	if !b.shut() {
		return nil
	}
	return b.closeAll(ctx)
}

// shut shuts the gate, which aborts the Opens in flight and stops the watch and
// the state writer, and waits for them; it reports false when the backend was
// closed already.
func (b *Backend) shut() bool {
	if !b.gate.Shut() {
		return false
	}
	b.watchers.Wait()
	return true
}

// closeAll is Close once the backend is shut.
func (b *Backend) closeAll(ctx context.Context) error {
	ps := b.placementList()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { errs[i] = p.close(ctx) })
	}
	wg.Wait()
	_, err := b.removeOwned(ctx, b.mine)
	b.saveKept()
	keep.Unlock(b.stateLock)
	errs = append(errs, err, b.api.Close())
	if err := errors.Join(errs...); err != nil {
		b.cfg.log.Error("swarm backend closed with errors", "err", err)
		return fmt.Errorf("close swarm backend: %w", err)
	}
	b.cfg.log.Info("swarm backend closed", "sessions", len(ps))
	return nil
}

// placementList returns the tracked placements.
func (b *Backend) placementList() []*Placement {
	b.mu.Lock()
	defer b.mu.Unlock()
	ps := make([]*Placement, 0, len(b.placements))
	for p := range b.placements {
		ps = append(ps, p)
	}
	return ps
}

// Health reports whether the backend can place sessions: the manager answers, is a
// manager, and at least one node is ready and active. (New probed every node for
// no-new-privileges; each session's task checks it again as it starts.)
func (b *Backend) Health(ctx context.Context) error {
	if b.gate.Closed() {
		return ErrClosed
	}
	if err := b.checkDaemon(ctx); err != nil {
		return err
	}
	nodes, err := b.api.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		if n.Status.State == swarm.NodeStateReady && n.Spec.Availability == swarm.NodeAvailabilityActive {
			return nil
		}
	}
	return fmt.Errorf("no swarm node is ready and active (%d nodes)", len(nodes.Items))
}

// SessionNetwork reports whether addr is on one of the sessions' networks, where
// kernelbox's own container has an address too: a listener on all of the
// container's addresses would take connections from every session's kernel
// there. kernelbox serve refuses connections that arrive on such an address.
func (b *Backend) SessionNetwork(addr netip.Addr) bool {
	addr = addr.Unmap()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.subnets {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// readyNodes counts the nodes that are ready and active (0 when the manager
// does not answer).
func (b *Backend) readyNodes(ctx context.Context) int {
	nodes, err := b.api.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return 0
	}
	n := 0
	for _, nd := range nodes.Items {
		if nd.Status.State == swarm.NodeStateReady && nd.Spec.Availability == swarm.NodeAvailabilityActive {
			n++
		}
	}
	return n
}

// nodeName names a node for messages: its hostname and short id.
func (b *Backend) nodeName(ctx context.Context, id string) string {
	b.mu.Lock()
	name, ok := b.nodes[id]
	b.mu.Unlock()
	if ok {
		return name
	}
	name = "node " + dockerapi.Short(id)
	if r, err := b.api.NodeInspect(ctx, id, client.NodeInspectOptions{}); err == nil {
		name = fmt.Sprintf("node %s (%s)", r.Node.Description.Hostname, dockerapi.Short(id))
		b.mu.Lock()
		b.nodes[id] = name
		b.mu.Unlock()
	}
	return name
}

func (b *Backend) track(p *Placement) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gate.Closed() {
		return false
	}
	b.placements[p] = struct{}{}
	return true
}

// forget drops p from the backend's placements; it reports whether p was one.
func (b *Backend) forget(p *Placement) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.placements[p]
	delete(b.placements, p)
	return ok
}

// randomHex returns n random bytes, hex-encoded.
func randomHex(n int) (string, error) {
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(buf), nil
}
