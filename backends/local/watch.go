package local

import (
	"context"
	"fmt"
	"time"

	"github.com/kernelbox/kernelbox/internal/jupyterproc"
	"github.com/kernelbox/kernelbox/jupyter"
)

// Watching the server: a server that is running but does not answer (stopped with
// SIGSTOP, deadlocked, swapped out) would hold every call and every kernel start
// until their own timeouts, minutes later, while a process check says it is fine. A
// watchdog asks it GET /api every probeEvery; once it has not answered for
// frozenAfter it is killed, so the next call starts a new server and the sessions on
// the old one are told their state is lost, as after a crash. Health reports the
// silence as soon as one probe has gone unanswered.
const (
	probeEvery   = 2 * time.Second
	probeTimeout = 3 * time.Second
	frozenAfter  = 15 * time.Second
)

// watch probes srv until it exits or the backend closes, killing it once it has been
// silent for frozenAfter.
func (b *Backend) watch(srv *jupyterproc.Server, stop <-chan struct{}) {
	defer b.wg.Done()
	c, err := jupyter.NewClient(srv.Endpoint(), &jupyter.ClientOptions{Timeout: probeTimeout})
	if err != nil {
		return
	}
	defer c.CloseIdle()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	var silent time.Time // since when no probe has been answered
	for {
		select {
		case <-srv.Done():
			return
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		_, err := c.Version(ctx)
		cancel()
		c.CloseIdle() // no connection (and its two goroutines) kept between probes
		if err == nil {
			silent = time.Time{}
			b.setSilent(srv, silent)
			continue
		}
		if silent.IsZero() {
			silent = time.Now().Add(-probeTimeout)
		}
		b.setSilent(srv, silent)
		if time.Since(silent) < frozenAfter {
			continue
		}
		b.log.Error("jupyter server has stopped answering; killing it so that the next call starts a new one",
			"pid", srv.Pid(), "silent_for", time.Since(silent).Round(time.Second), "last_err", err)
		b.mu.Lock()
		if b.srv == srv {
			b.srv, b.silent = nil, time.Time{} // the next Open starts a new server at once
		}
		b.mu.Unlock()
		kill, now := context.WithCancel(context.Background())
		now() // Stop with a done context: SIGTERM then SIGKILL at once (a stopped process ignores SIGTERM)
		_ = srv.Stop(kill)
		return
	}
}

// setSilent records since when srv has not answered (zero: it answers).
func (b *Backend) setSilent(srv *jupyterproc.Server, since time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv == srv {
		b.silent = since
	}
}

// silence says how long the running server has not answered, "" when it answers.
func (b *Backend) silence() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.silent.IsZero() {
		return ""
	}
	return fmt.Sprintf("the jupyter server (pid %d) has not answered for %s; it is killed and replaced after %s of silence",
		b.srv.Pid(), time.Since(b.silent).Round(time.Second), frozenAfter)
}
