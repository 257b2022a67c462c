package swarm

import (
	"context"
	"fmt"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
)

// watchEvery is how often the watch asks the manager about the sessions' tasks and
// nodes: two requests per round, however many sessions there are.
const watchEvery = time.Second

// watch starts the backend's one watch goroutine, if it is not running. It ends when
// the backend closes.
func (b *Backend) watch() {
	b.mu.Lock()
	if b.watching {
		b.mu.Unlock()
		return
	}
	b.watching = true
	b.mu.Unlock()
	b.watchers.Go(func() {
		life := b.gate.Life()
		t := time.NewTicker(watchEvery)
		defer t.Stop()
		for {
			select {
			case <-life.Done():
				return
			case <-t.C:
				b.checkOnce(life)
			}
		}
	})
}

// checkOnce looks at every live session's task and node once, and loses those whose
// task no longer runs or whose node is down, drained or gone. A failed request
// changes nothing: a manager that does not answer says nothing about the tasks.
func (b *Backend) checkOnce(ctx context.Context) {
	ps := b.placementList()
	if len(ps) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	f := make(client.Filters)
	for _, p := range ps {
		f = f.Add("service", p.service)
	}
	tasks, err := b.api.TaskList(ctx, client.TaskListOptions{Filters: f})
	if err != nil {
		return
	}
	nodes, err := b.api.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return
	}
	byID := make(map[string]swarm.Task, len(tasks.Items))
	for _, t := range tasks.Items {
		byID[t.ID] = t
	}
	nodeByID := make(map[string]swarm.Node, len(nodes.Items))
	for _, n := range nodes.Items {
		nodeByID[n.ID] = n
	}
	for _, p := range ps {
		if why := lossReason(p, byID, nodeByID); why != "" {
			p.lose(why)
		}
	}
}

// lossReason says why p's kernel is gone, or "" while its task runs on a live node.
func lossReason(p *Placement, tasks map[string]swarm.Task, nodes map[string]swarm.Node) string {
	n, ok := nodes[p.nodeID]
	switch {
	case !ok:
		return fmt.Sprintf("%s left the swarm; the session's kernel is gone", p.node)
	case n.Status.State != swarm.NodeStateReady:
		return fmt.Sprintf("%s is %s (%s); the session's kernel is gone with it", p.node, n.Status.State, firstNonEmpty(n.Status.Message, "no heartbeat"))
	case n.Spec.Availability == swarm.NodeAvailabilityDrain:
		return fmt.Sprintf("%s was drained; the session's kernel was stopped", p.node)
	}
	t, ok := tasks[p.task]
	if !ok {
		return fmt.Sprintf("the session's task on %s is gone", p.node)
	}
	if t.Status.State != swarm.TaskStateRunning {
		why := firstNonEmpty(t.Status.Err, t.Status.Message)
		if t.Status.ContainerStatus != nil && t.Status.ContainerStatus.ExitCode != 0 {
			why = fmt.Sprintf("%s, exit code %d", why, t.Status.ContainerStatus.ExitCode)
		}
		return fmt.Sprintf("the session's task on %s is %s (%s)", p.node, t.Status.State, why)
	}
	return ""
}
