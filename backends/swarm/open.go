package swarm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
	"github.com/kernelbox/kernelbox/backends/internal/keep"
	"github.com/kernelbox/kernelbox/backends/internal/kernelfiles"
	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
	"github.com/kernelbox/kernelbox/backends/internal/sessionproxy"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/serverflags"
	"github.com/kernelbox/kernelbox/internal/undo"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/kernelfs"
)

// pollEvery is how often Open asks the manager for the task's state and the
// server for an answer.
const pollEvery = 100 * time.Millisecond

// StartError is returned by [Backend.Open] when the session's service was created but
// its server did not become ready (Kind "service"): Name, Node, State, Err and
// Logs say what happened. Everything the Open made is removed by then.
type StartError = sandbox.StartError

// Open creates the session's network, token secret and service, attaches kernelbox's
// own container to the network, and waits, up to [Options.ReadyTimeout], until the
// task runs and its Jupyter server answers on the task's overlay address. On failure
// it removes what it made and returns a [*StartError] when the task had started.
func (b *Backend) Open(ctx context.Context, spec executor.SessionSpec) (executor.Placement, error) {
	return keep.Open(ctx, &b.gate, ErrClosed, spec.ID, func(ctx context.Context) (executor.Placement, error) {
		ctx, cancel := context.WithTimeout(ctx, b.cfg.readyTimeout)
		defer cancel()
		return b.open(ctx, spec)
	})
}

// launch is one Open in progress.
type launch struct {
	obj   sessionObjects
	cfg   config // the backend's, with the session's template applied
	log   *slog.Logger
	token string
	undo  undo.List
	t0    time.Time
	// egress is the session's proxy at proxy, kernelbox's address on its
	// network; nil without an allowlist (egress.go).
	egress *sessionproxy.Proxy
	proxy  netip.AddrPort
	warm   bool // spec.Warm: obj.session is a warm pool's placeholder
}

func (b *Backend) open(ctx context.Context, spec executor.SessionSpec) (_ *Placement, err error) {
	key, err := randomHex(4)
	if err != nil {
		return nil, err
	}
	l := &launch{obj: sessionObjects{name: "kernelbox-" + key, session: spec.ID}, cfg: b.cfg.withTemplate(spec.Template), t0: time.Now(), warm: spec.Warm}
	l.log = b.cfg.log.With("session", spec.ID, "service", l.obj.name)
	if l.token, err = randomHex(32); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			if uerr := l.undo.Run(teardownTimeout); uerr != nil {
				l.log.Error("clean up failed open", "err", uerr)
			}
		}
	}()
	// Creates run under a context ctx cannot cancel: an abandoned create may still
	// complete in the manager, leaving an object nobody knows the id of.
	mk, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	if err := b.createNetwork(mk, l); err != nil {
		return nil, err
	}
	if err := b.createSecret(mk, l); err != nil {
		return nil, err
	}
	if rules := spec.Template.Network; rules != nil {
		if err := b.startEgress(mk, l, rules); err != nil {
			return nil, err
		}
	}
	svc, err := b.createService(mk, l)
	if err != nil {
		return nil, err
	}
	// Attached after the service exists: the network is then already on the task's
	// node too, and the attachment is the backend's way in. (With an allowlist it
	// was attached before: the task's environment names kernelbox's address.)
	if l.egress == nil {
		if err := b.attach(mk, l.obj.network, l.obj.name, netip.Addr{}); err != nil {
			return nil, err
		}
	}
	task, addr, err := b.awaitTask(ctx, svc, l)
	if err != nil {
		return nil, err
	}
	tRunning := time.Now()
	node := b.nodeName(ctx, task.NodeID)
	ap := netip.AddrPortFrom(addr, serverPort)
	p := &Placement{
		b: b, obj: l.obj, service: svc, task: task.ID, nodeID: task.NodeID, node: node,
		addr: ap, started: l.t0, workSize: l.cfg.workSize,
		egress: l.egress, proxy: l.proxy, rules: spec.Template.Network,
		server: executor.Server{
			Endpoint: jupyter.Endpoint{URL: "http://" + ap.String(), Token: l.token},
			// "ir" and any other name but "python3" must be a kernelspec the
			// image has (kernelbox/kernel-r has "ir").
			KernelName: serverflags.SpecName(spec.Template.Kernel),
		},
	}
	// Without a disk quota, the session's byte budget is its /workspace tmpfs,
	// which the kernel cannot write past either.
	p.Files = kernelfiles.New(kernelfs.Options{Logger: l.log}, l.cfg.workSize, &p.loss)
	if err := b.awaitServer(ctx, p); err != nil {
		return nil, b.startError(svc, l.obj.name, node, string(task.Status.State), err)
	}
	if !b.track(p) {
		return nil, ErrClosed
	}
	l.undo = undo.List{} // the placement owns it all now
	b.keptChanged()
	b.watch()
	l.log.Info("session task ready", "node", node, "addr", addr, "elapsed", time.Since(l.t0).Round(time.Millisecond),
		"server", time.Since(tRunning).Round(time.Millisecond))
	return p, nil
}

func (b *Backend) createNetwork(ctx context.Context, l *launch) error {
	r, err := b.api.NetworkCreate(ctx, l.obj.name, client.NetworkCreateOptions{
		Driver: "overlay", Scope: "swarm", Internal: true, Attachable: true, Labels: b.labels(l.obj.session),
	})
	if err != nil {
		return fmt.Errorf("create network: %w", err)
	}
	l.obj.network = r.ID
	l.undo.Add("remove network "+l.obj.name, func(ctx context.Context) error { return b.removeNetwork(ctx, r.ID, l.obj.name) })
	// Its subnet, before kernelbox's container joins it (SessionNetwork). The
	// manager's allocator gives it one after the create returns: on a busy manager
	// an inspect right away can show none yet.
	delay := 20 * time.Millisecond
	wait := time.NewTimer(subnetWait)
	defer wait.Stop()
	for {
		nw, err := b.api.NetworkInspect(ctx, r.ID, client.NetworkInspectOptions{})
		if err != nil {
			return fmt.Errorf("inspect network %s: %w", l.obj.name, err)
		}
		for _, c := range nw.Network.IPAM.Config {
			if c.Subnet.IsValid() {
				b.mu.Lock()
				b.subnets[r.ID] = c.Subnet
				b.mu.Unlock()
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("network %s has no subnet yet: %w", l.obj.name, ctx.Err())
		case <-wait.C:
			return fmt.Errorf("network %s has no subnet %s after it was created (the swarm manager's allocator is behind)", l.obj.name, subnetWait)
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// subnetWait bounds the wait for a new session network's subnet.
const subnetWait = 30 * time.Second

func (b *Backend) createSecret(ctx context.Context, l *launch) error {
	body, err := serverflags.TokenConfig(l.token)
	if err != nil {
		return err
	}
	name := l.obj.name + "-token"
	r, err := b.api.SecretCreate(ctx, client.SecretCreateOptions{Spec: swarm.SecretSpec{
		Annotations: swarm.Annotations{Name: name, Labels: b.labels(l.obj.session)}, Data: body,
	}})
	if err != nil {
		return fmt.Errorf("create secret: %w", err)
	}
	l.obj.secret = r.ID
	l.undo.Add("remove secret "+name, func(ctx context.Context) error {
		return b.retryInUse(ctx, "remove secret "+name, func() error {
			_, err := b.api.SecretRemove(ctx, r.ID, client.SecretRemoveOptions{})
			return err
		})
	})
	return nil
}

func (b *Backend) createService(ctx context.Context, l *launch) (string, error) {
	// QueryRegistry false: the image is taken as the nodes have it
	// (`--no-resolve-image`); there is no registry to ask.
	r, err := b.api.ServiceCreate(ctx, client.ServiceCreateOptions{Spec: b.serviceSpec(l.obj, l.cfg)})
	if err != nil {
		return "", fmt.Errorf("create service: %w", err)
	}
	for _, w := range r.Warnings {
		l.log.Warn("service create warning", "warning", w)
	}
	l.undo.Add("remove service "+l.obj.name, func(ctx context.Context) error {
		if _, err := b.api.ServiceRemove(ctx, r.ID, client.ServiceRemoveOptions{}); err != nil && !dockerapi.IsNotFound(err) {
			return err
		}
		return nil
	})
	return r.ID, nil
}

// awaitTask waits until the service's task runs and has its address on the session's
// network.
func (b *Backend) awaitTask(ctx context.Context, svc string, l *launch) (swarm.Task, netip.Addr, error) {
	var last swarm.Task
	for {
		tasks, err := b.api.TaskList(ctx, client.TaskListOptions{Filters: make(client.Filters).Add("service", svc)})
		if err == nil {
			for _, t := range tasks.Items {
				last = t
				switch t.Status.State {
				case swarm.TaskStateRunning:
					for _, na := range t.NetworksAttachments {
						if na.Network.ID == l.obj.network && len(na.Addresses) > 0 {
							return t, na.Addresses[0].Addr(), nil
						}
					}
				case swarm.TaskStateComplete, swarm.TaskStateShutdown, swarm.TaskStateFailed, swarm.TaskStateRejected, swarm.TaskStateOrphaned, swarm.TaskStateRemove:
					cause := errors.New(firstNonEmpty(t.Status.Err, t.Status.Message, "task ended"))
					if t.Status.ContainerStatus != nil && t.Status.ContainerStatus.ExitCode == sandbox.ExitNoNewPrivs {
						cause = fmt.Errorf("%w on this node: %v", ErrNoNewPrivileges, cause)
					}
					return t, netip.Addr{}, b.startError(svc, l.obj.name, b.nodeName(ctx, t.NodeID), string(t.Status.State), cause)
				}
			}
		}
		select {
		case <-ctx.Done():
			node := ""
			if last.NodeID != "" {
				node = b.nodeName(context.WithoutCancel(ctx), last.NodeID)
			}
			why := ctx.Err()
			if last.Status.Message != "" || last.Status.Err != "" {
				why = fmt.Errorf("%w (%s)", why, firstNonEmpty(last.Status.Err, last.Status.Message))
			}
			return last, netip.Addr{}, b.startError(svc, l.obj.name, node, string(last.Status.State), why)
		case <-time.After(pollEvery):
		}
	}
}

// awaitServer waits until the task's Jupyter server answers GET /api with the token.
func (b *Backend) awaitServer(ctx context.Context, p *Placement) error {
	c, err := jupyter.NewClient(p.server.Endpoint, &jupyter.ClientOptions{Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer c.CloseIdle()
	for {
		_, err := c.Version(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server at %s did not answer: %w (last: %v)", p.server.Endpoint.URL, ctx.Err(), err)
		case <-time.After(pollEvery):
		}
	}
}

// startError describes a service that did not come up, with its last log lines.
func (b *Backend) startError(svc, name, node, state string, cause error) *StartError {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return &StartError{Kind: sandbox.KindService, Name: name, Node: node, State: state, Err: cause, Logs: b.lastLogs(ctx, svc, 20)}
}

// lastLogs returns the service's last n log lines, or a line saying why they
// could not be read.
func (b *Backend) lastLogs(ctx context.Context, svc string, n int) []string {
	rc, err := b.api.ServiceLogs(ctx, svc, client.ServiceLogsOptions{ShowStdout: true, ShowStderr: true, Tail: fmt.Sprint(n)})
	return sandbox.LogLines(rc, err, n)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
