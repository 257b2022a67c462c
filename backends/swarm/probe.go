package swarm

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
)

// Engine 20.10 neither honours NoNewPrivileges in a service spec nor lists
// "no-new-privileges" in `docker info`'s SecurityOptions, so the only way to learn
// whether a node's daemon sets it is to run something there: probeNodes runs a
// global job (one task per node, API 1.41) that exits 97 where NoNewPrivs is not 1,
// and names those nodes. Session tasks check the same thing as they start
// (sandbox.RequireNoNewPrivs), so a node that joins later is refused too.

// probeTimeout bounds the probe; nodes that have not finished by then are named.
const probeTimeout = 60 * time.Second

// probeNodes checks every ready, active node's daemon for no-new-privileges.
func (b *Backend) probeNodes(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	init := true
	name := "kernelbox-" + b.instance[:8] + "-probe"
	spec := swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: name, Labels: b.labels("")},
		Mode:        swarm.ServiceMode{GlobalJob: &swarm.GlobalJob{}},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{
				Image: b.cfg.Image, Labels: b.labels(""), User: b.cfg.User(), Init: &init, ReadOnly: true,
				CapabilityDrop: []string{"ALL"},
				Command:        sandbox.RequireNoNewPrivs("kernelbox-probe", []string{"true"}),
			},
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionNone},
			Placement:     &swarm.Placement{Constraints: b.cfg.constraints},
		},
	}
	r, err := b.api.ServiceCreate(ctx, client.ServiceCreateOptions{Spec: spec})
	if err != nil {
		return fmt.Errorf("probe nodes: create service: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
		defer cancel()
		if _, err := b.api.ServiceRemove(rctx, r.ID, client.ServiceRemoveOptions{}); err != nil && !dockerapi.IsNotFound(err) {
			b.cfg.log.Warn("remove probe service", "err", err)
		}
	}()
	for {
		done, bad, pending, err := b.probeState(ctx, r.ID)
		if err == nil && done {
			if len(bad) > 0 {
				return fmt.Errorf("%w on %s: set it in each node's daemon.json", ErrNoNewPrivileges, strings.Join(bad, ", "))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("probe nodes for no-new-privileges: %w; not finished on %s", ctx.Err(), strings.Join(pending, ", "))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// probeState reads the probe's tasks: done once every ready, active node has one
// that ended; bad names the nodes whose task failed.
func (b *Backend) probeState(ctx context.Context, svc string) (done bool, bad, pending []string, err error) {
	nodes, err := b.api.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return false, nil, nil, err
	}
	tasks, err := b.api.TaskList(ctx, client.TaskListOptions{Filters: make(client.Filters).Add("service", svc)})
	if err != nil {
		return false, nil, nil, err
	}
	ended := map[string]swarm.Task{}
	for _, t := range tasks.Items {
		switch t.Status.State {
		case swarm.TaskStateComplete, swarm.TaskStateFailed, swarm.TaskStateRejected, swarm.TaskStateShutdown:
			ended[t.NodeID] = t
		}
	}
	done = true
	for _, n := range nodes.Items {
		if n.Status.State != swarm.NodeStateReady || n.Spec.Availability != swarm.NodeAvailabilityActive {
			continue
		}
		name := b.nodeName(ctx, n.ID)
		t, ok := ended[n.ID]
		switch {
		case !ok:
			done = false
			pending = append(pending, name)
		case t.Status.State != swarm.TaskStateComplete:
			why := firstNonEmpty(t.Status.Err, t.Status.Message)
			if t.Status.ContainerStatus == nil || t.Status.ContainerStatus.ExitCode != sandbox.ExitNoNewPrivs {
				why = "probe failed: " + why
			} else {
				why = "NoNewPrivs is 0"
			}
			bad = append(bad, name+" ("+why+")")
		}
	}
	sort.Strings(bad)
	return done, bad, pending, nil
}
