package swarm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
)

// Labels on every service, task container, network, secret and config the backend
// creates (see sandbox.Labels). Ownership across a cluster is by deployment
// (LabelOwner, Options.Owner) and backend instance (LabelInstance), not by process:
// the process that made an object may be on another machine than the one that
// finds it.
const (
	LabelCreatedBy = sandbox.LabelCreatedBy  // always "kernelbox"
	LabelOwner     = sandbox.LabelDeployment // Options.Owner
	LabelInstance  = sandbox.LabelInstance   // the creating Backend's uuid
	LabelSession   = sandbox.LabelSession    // the session id (or warm-pool placeholder)
)

// labels returns the labels of the backend's objects; session may be empty (the
// backend's own configs).
func (b *Backend) labels(session string) map[string]string {
	l := sandbox.Labels(b.instance, session)
	l[LabelOwner] = b.cfg.owner
	return l
}

// filterOwned selects this deployment's objects; with instance set, only that
// instance's.
func (b *Backend) filterOwned(instance string) client.Filters {
	f := make(client.Filters).Add("label", LabelCreatedBy+"="+sandbox.CreatedBy).Add("label", LabelOwner+"="+b.cfg.owner)
	if instance != "" {
		f = f.Add("label", LabelInstance+"="+instance)
	}
	return f
}

// reap removes the services, networks, secrets and configs of this deployment's
// other instances, and those of this instance that the state file does not list
// (kept): they belong to a kernelbox that is gone (one runs per Owner), whose
// sessions cannot be adopted (their tokens died with it, or were never kept). It
// returns how many services it removed.
func (b *Backend) reap(ctx context.Context, kept map[string]bool) (int, error) {
	pick := func(id string, labels map[string]string) bool {
		return labels[LabelInstance] != b.instance || !kept[id]
	}
	ctx, cancel := context.WithTimeout(ctx, reapWait)
	defer cancel()
	total := 0
	for {
		n, err := b.removeOwned(ctx, pick)
		total += n
		if err != nil {
			return total, err
		}
		// The engine can still list an object a removal was accepted for (a
		// network whose last endpoint was going away): pass again until none is.
		left, err := b.owned(ctx, pick)
		if err != nil || left == "" {
			return total, err
		}
		select {
		case <-ctx.Done():
			return total, fmt.Errorf("still there after %s: %s", reapWait, left)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// reapWait bounds reaping at start.
const reapWait = 2 * time.Minute

// owned names the services and networks of this deployment that pick selects, or
// "" when there are none.
func (b *Backend) owned(ctx context.Context, pick func(id string, labels map[string]string) bool) (string, error) {
	var left []string
	svcs, err := b.api.ServiceList(ctx, client.ServiceListOptions{Filters: b.filterOwned("")})
	if err != nil {
		return "", fmt.Errorf("list services: %w", err)
	}
	for _, s := range svcs.Items {
		if pick(s.ID, s.Spec.Labels) {
			left = append(left, "service "+s.Spec.Name)
		}
	}
	nets, err := b.api.NetworkList(ctx, client.NetworkListOptions{Filters: b.filterOwned("")})
	if err != nil {
		return "", fmt.Errorf("list networks: %w", err)
	}
	for _, nw := range nets.Items {
		if pick(nw.ID, nw.Labels) {
			left = append(left, "network "+nw.Name)
		}
	}
	return strings.Join(left, ", "), nil
}

// removeOwned removes this deployment's objects that pick selects: services first
// (their tasks hold the networks, secrets and configs), then the rest, retried while
// the engine still counts them in use.
func (b *Backend) removeOwned(ctx context.Context, pick func(id string, labels map[string]string) bool) (int, error) {
	var errs []error
	svcs, err := b.api.ServiceList(ctx, client.ServiceListOptions{Filters: b.filterOwned("")})
	if err != nil {
		return 0, fmt.Errorf("list services: %w", err)
	}
	n := 0
	for _, s := range svcs.Items {
		if !pick(s.ID, s.Spec.Labels) {
			continue
		}
		if _, err := b.api.ServiceRemove(ctx, s.ID, client.ServiceRemoveOptions{}); err != nil && !dockerapi.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove service %s: %w", s.Spec.Name, err))
			continue
		}
		b.cfg.log.Info("removed service", "service", s.Spec.Name, "session", s.Spec.Labels[LabelSession], "instance", s.Spec.Labels[LabelInstance])
		n++
	}
	nets, err := b.api.NetworkList(ctx, client.NetworkListOptions{Filters: b.filterOwned("")})
	if err != nil {
		errs = append(errs, fmt.Errorf("list networks: %w", err))
	} else {
		for _, nw := range nets.Items {
			if pick(nw.ID, nw.Labels) {
				errs = append(errs, b.removeNetwork(ctx, nw.ID, nw.Name))
			}
		}
	}
	secs, err := b.api.SecretList(ctx, client.SecretListOptions{Filters: b.filterOwned("")})
	if err != nil {
		errs = append(errs, fmt.Errorf("list secrets: %w", err))
	} else {
		for _, s := range secs.Items {
			if pick(s.ID, s.Spec.Labels) {
				errs = append(errs, b.retryInUse(ctx, "remove secret "+s.Spec.Name, func() error {
					_, err := b.api.SecretRemove(ctx, s.ID, client.SecretRemoveOptions{})
					return err
				}))
			}
		}
	}
	cfs, err := b.api.ConfigList(ctx, client.ConfigListOptions{Filters: b.filterOwned("")})
	if err != nil {
		errs = append(errs, fmt.Errorf("list configs: %w", err))
	} else {
		for _, c := range cfs.Items {
			if pick(c.ID, c.Spec.Labels) {
				errs = append(errs, b.retryInUse(ctx, "remove config "+c.Spec.Name, func() error {
					_, err := b.api.ConfigRemove(ctx, c.ID, client.ConfigRemoveOptions{})
					return err
				}))
			}
		}
	}
	return n, errors.Join(errs...)
}

// removeNetwork detaches kernelbox's own container from a session network and
// removes it, retrying while the service's task is still going (its endpoint keeps
// the network in use for a moment after `service rm`).
func (b *Backend) removeNetwork(ctx context.Context, id, name string) error {
	_, err := b.api.NetworkDisconnect(ctx, id, client.NetworkDisconnectOptions{Container: b.cfg.self, Force: true})
	if err != nil && !dockerapi.IsNotFound(err) {
		b.cfg.log.Debug("detach from network", "network", name, "err", err)
	}
	err = b.retryInUse(ctx, "remove network "+name, func() error {
		_, err := b.api.NetworkRemove(ctx, id, client.NetworkRemoveOptions{})
		return err
	})
	if err == nil {
		b.mu.Lock()
		delete(b.subnets, id)
		b.mu.Unlock()
	}
	return err
}

// retryInUse runs rm until it succeeds, the object is gone, or ctx ends. The
// engine refuses to remove a network, secret or config while a task that is
// shutting down still uses it; it gives no typed error for that, so every other
// error is retried too, and the last one returned.
func (b *Backend) retryInUse(ctx context.Context, what string, rm func() error) error {
	delay := 50 * time.Millisecond
	for {
		err := rm()
		if err == nil || dockerapi.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, err)
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}
