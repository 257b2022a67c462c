package docker

import (
	"context"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
)

// Watching a container for its end. A container that stops while its session lives
// (docker kill or stop from outside, its max lifetime, the daemon's OOM killer taking
// its server) is gone for good: the backend never restarts one. Without being told,
// the executor learnt it only from the kernel's connection, which spends up to its
// reconnect bound (5 s) re-dialling a socket nobody listens on: a call made in that
// window went out on the dead connection and was reported as kernel_died, a death that
// came before it (issue 25 item 0 on docker), and a reconnect to the dying server
// waited out its 10 s bound. The placement closes Lost (executor.LossReporter) as soon
// as the daemon says the container no longer runs.

// How long the watch waits before asking the daemon again after its wait request
// failed (the daemon restarting, say): rewatchDelay, doubled after each failure in a
// row up to rewatchMax, so that a daemon down for long is not asked (and logged)
// every second.
const (
	rewatchDelay = time.Second
	rewatchMax   = 30 * time.Second
)

// watchExit starts the goroutine that closes p.lost once the container stops
// running. stopWatch ends it and waits for it; Placement.close calls it before it
// removes the container, so that kernelbox's own removal is not reported as a loss.
func (p *Placement) watchExit() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	p.stopWatch = func() {
		cancel()
		<-done
	}
	go func() {
		defer close(done)
		delay := rewatchDelay
		for {
			res := p.b.api.ContainerWait(ctx, p.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
			select {
			case w := <-res.Result:
				p.lose(w.StatusCode)
				return
			case err := <-res.Error:
				if ctx.Err() != nil {
					return
				}
				if dockerapi.IsNotFound(err) {
					p.lose(-1)
					return
				}
				_, session := p.names()
				p.b.cfg.log.Warn("watch container: wait failed; retrying", "session", session, "container", dockerapi.Short(p.id), "err", err)
			case <-ctx.Done():
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, rewatchMax)
		}
	}()
}

// lose closes Lost, once.
func (p *Placement) lose(code int64) {
	p.loseOnce.Do(func() {
		_, session := p.names()
		p.b.cfg.log.Info("container stopped while its session lives", "session", session, "container", dockerapi.Short(p.id), "exit_code", code)
		close(p.lost)
	})
}

// Lost returns a channel that is closed once the container has stopped running
// without kernelbox removing it: its server and kernel are gone for good, and the
// session's next call needs a new container.
func (p *Placement) Lost() <-chan struct{} { return p.lost }
