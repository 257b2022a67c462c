package swarm

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
)

// Check reports whether a swarm can run this backend's sessions, without starting
// one (kernelbox doctor): the daemon at Options.DockerHost is an active manager, at
// least one node is ready and active, and every such node's daemon sets
// "no-new-privileges" (probed by a short global job of Options.Image, so a node
// that lacks the image fails too). It does not need to run in a container. On
// success it says how many nodes are ready.
func Check(ctx context.Context, opts Options) (string, error) {
	cfg, err := opts.resolve()
	if err != nil {
		return "", err
	}
	api, err := dockerapi.NewClient(cfg.host)
	if err != nil {
		return "", err
	}
	defer api.Close()
	b := &Backend{api: api, cfg: cfg, instance: uuid.NewString(), nodes: make(map[string]string)}
	if err := b.checkDaemon(ctx); err != nil {
		return "", err
	}
	nodes, err := api.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return "", fmt.Errorf("list nodes: %w", err)
	}
	ready := 0
	for _, n := range nodes.Items {
		if n.Status.State == swarm.NodeStateReady && n.Spec.Availability == swarm.NodeAvailabilityActive {
			ready++
		}
	}
	if ready == 0 {
		return "", fmt.Errorf("no swarm node is ready and active (%d nodes)", len(nodes.Items))
	}
	if err := b.probeNodes(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d of %d nodes ready and active, each daemon with no-new-privileges and the image %s", ready, len(nodes.Items), cfg.Image), nil
}
