package docker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kernelbox/kernelbox/jupyter"
)

// serverProbe bounds Health's GET /api to each session's server.
const serverProbe = 3 * time.Second

// silentServers asks the Jupyter server of every ready session container for
// GET /api, all at once, and reports those that did not answer within serverProbe:
// a paused or frozen container that is still running, which the container watch
// (exit.go) does not see. Its session's next call gives up on it (its interrupt goes
// unanswered) and gets a new container.
func (b *Backend) silentServers(ctx context.Context) error {
	b.mu.Lock()
	ps := make([]*Placement, 0, len(b.placements))
	for _, p := range b.placements {
		select {
		case <-p.lost: // stopped: the container watch has told its session
			continue
		default:
		}
		if p.ready.Load() {
			ps = append(ps, p)
		}
	}
	b.mu.Unlock()
	var mu sync.Mutex
	var silent []string
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.probe(ctx); err != nil {
				mu.Lock()
				name, session := p.names()
				silent = append(silent, fmt.Sprintf("%s (session %s): %v", name, session, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(silent) == 0 {
		return nil
	}
	sort.Strings(silent)
	return fmt.Errorf("%d session container(s) not answering (frozen or paused?); their next call gets a new container: %s",
		len(silent), strings.Join(silent, "; "))
}

// probe asks the placement's server for GET /api within serverProbe. A placement
// closed meanwhile is not reported.
func (p *Placement) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, serverProbe)
	defer cancel()
	c, err := jupyter.NewClient(p.server.Endpoint, &jupyter.ClientOptions{Timeout: serverProbe})
	if err != nil {
		return err
	}
	defer c.CloseIdle()
	_, err = c.Version(ctx)
	if err != nil && (p.closing.Load() || errors.Is(ctx.Err(), context.Canceled)) {
		return nil
	}
	return err
}
