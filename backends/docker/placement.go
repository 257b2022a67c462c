package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
	"github.com/kernelbox/kernelbox/backends/internal/sessionproxy"
	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/procwatch"
	"github.com/kernelbox/kernelbox/internal/serverflags"
)

// Placement is one session's container. It is safe for concurrent use.
type Placement struct {
	b        *Backend
	id       string   // container id
	key      string   // the random part of its name, also its state directory's name
	sockDir  string   // host path of the container's state directory
	sock     *os.File // the server's socket, pinned (O_PATH); nil until ready
	sockDev  uint64   // the pinned socket's device and inode (keep.go)
	sockIno  uint64
	server   executor.Server
	started  time.Time           // just before the container was created
	memory   int64               // its memory limit (0: none), for diagnoses
	memTmpl  bool                // the limit is its template's (not the backend's)
	lifetime time.Duration       // its max lifetime
	pid      int                 // its first process's id on the host; 0 until ready
	watched  procwatch.Holder    // the kernel's process, once watched (kernelwatch.go)
	egress   *sessionproxy.Proxy // its egress proxy; nil without a network allowlist
	// egressKept is its allowlist when its proxy listens in the container's
	// network namespace and has no secrets: the next process can listen there
	// again and adopt the container (keep.go); nil otherwise.
	egressKept *egress.Rules
	relay      *relayHost // its relay's socket (relay.go); nil with the pinned transport

	relayLost atomic.Bool // the relay went while the container ran (watchRelay)

	closeMu sync.Mutex // held for the whole of close
	closed  bool       // guarded by closeMu

	ready     atomic.Bool   // server is set and answered once (Health probes only these)
	closing   atomic.Bool   // close has begun (Health does not report it)
	lost      chan struct{} // closed by lose once the container stopped (exit.go)
	loseOnce  sync.Once
	stopWatch func() // ends watchExit's goroutine; nil until the server is ready

	nameMu  sync.Mutex // guards name and session, which Adopt changes
	name    string     // container name (adopt.go)
	session string     // the session it serves, or the warm pool's placeholder

	mu         sync.Mutex // guards the OOM fields
	oomFile    string     // cgroup file with the OOM-kill counter; "" when unreadable
	oomSeen    uint64     // OOM kills already reported by Diagnose
	oomFlagged bool       // State.OOMKilled already reported by Diagnose
}

var _ executor.Placement = (*Placement)(nil)
var (
	_ executor.Diagnoser     = (*Placement)(nil)
	_ executor.KernelLogger  = (*Placement)(nil)
	_ executor.ResetReplacer = (*Placement)(nil)
	_ executor.LossReporter  = (*Placement)(nil)
	_ executor.Adopter       = (*Placement)(nil)
)

// Server returns the container's Jupyter server: how to reach it and its token.
// With the pinned transport its socket's path is /proc/self/fd/N, the descriptor
// that pins the server's socket (see pinServerSocket): it reaches the server from
// this process only, and only until Close. With the relay (gVisor, relay.go) its
// Dial hands out the relay's connections instead, and Socket is empty. The
// session directory is the server's root, so KernelPath is "".
func (p *Placement) Server() executor.Server { return p.server }

// ContainerID returns the id of the session's container.
func (p *Placement) ContainerID() string { return p.id }

// Close removes the session's container (killing it if it still runs) and its socket
// directory. It runs under its own bounded context, so that a caller's cancelled
// context cannot leave the container behind; ctx only carries values. Closing twice
// is a no-op.
func (p *Placement) Close(ctx context.Context) error {
	ctx, cancel := teardownContext(ctx)
	defer cancel()
	return p.close(ctx)
}

// close removes the container and socket directory and forgets the placement. A
// concurrent call waits for the first to finish; after a failure the placement stays
// tracked so that Backend.Close tries again.
func (p *Placement) close(ctx context.Context) error {
	p.closing.Store(true)
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed {
		return nil
	}
	if p.stopWatch != nil {
		p.stopWatch()
		p.stopWatch = nil
	}
	p.watched.Set(nil)
	err := p.b.removeContainer(ctx, p.id)
	if rmErr := os.RemoveAll(p.sockDir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("remove state dir: %w", rmErr))
	} else if root := filepath.Dir(p.sockDir); root != p.b.sockRoot {
		// An adopted container's socket root, an earlier process's: gone with
		// its last container.
		_ = os.Remove(filepath.Join(root, keptMarker))
		if os.Remove(root) != nil {
			_ = markRoot(root, p.b.cfg.stateFile)
		}
	}
	if err != nil {
		return err
	}
	p.egress.Close()
	p.relay.close()
	if p.sock != nil {
		// Closed only once the container is gone: the descriptor keeps the
		// container's /tmp tmpfs alive, and a late dial of a reused descriptor
		// number would reach another server (which refuses this one's token).
		_ = p.sock.Close()
	}
	p.closed = true
	p.b.forget(p)
	_, session := p.names()
	p.b.cfg.log.Debug("container removed", "session", session, "container", dockerapi.Short(p.id))
	return nil
}

// ReplaceOnReset reports true: a kernel restarted in its container would inherit the
// container's processes, /tmp and home (HOME is /tmp), so a reset is a new container.
// Only /workspace, the session directory, carries over.
func (p *Placement) ReplaceOnReset() bool { return true }

// KernelLog returns the container's last log lines that concern the kernel (the
// container's Jupyter Server logs to its stdout and stderr).
func (p *Placement) KernelLog(ctx context.Context, kernelID string) string {
	return serverflags.KernelLines(p.b.lastLogs(ctx, p.id, 200), kernelID, 12)
}

// Diagnose explains why the session's kernel died, or returns "" when it knows no
// cause. For a container that has stopped it reports the exit code, and an OOM kill
// or the max lifetime when either is why. For a running container - Jupyter Server
// restarts a kernel that dies, so the container usually survives its kernel - it
// reports an OOM kill that happened since the previous call: each kill is reported
// once.
func (p *Placement) Diagnose(ctx context.Context) string {
	name, session := p.names()
	r, err := p.b.api.ContainerInspect(ctx, p.id, client.ContainerInspectOptions{})
	if dockerapi.IsNotFound(err) {
		return "container " + name + " is gone (removed)"
	}
	if err != nil || r.Container.State == nil {
		p.b.cfg.log.Warn("diagnose: inspect container failed", "session", session, "container", dockerapi.Short(p.id), "err", err)
		return ""
	}
	st := r.Container.State

	p.mu.Lock()
	defer p.mu.Unlock()
	oom := p.newOOMKills(ctx) || (st.OOMKilled && !p.oomFlagged)
	if st.OOMKilled {
		p.oomFlagged = true
	}

	if st.Running {
		if oom {
			return "kernel was OOM-killed" + p.limitNote()
		}
		if p.relayLost.Load() {
			return "the relay to the container's server was killed or exited in the container; the session gets a new container"
		}
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "container exited with code %d", st.ExitCode)
	// Docker sets OOMKilled on exit when any process in the container was OOM-killed.
	if st.OOMKilled || oom {
		b.WriteString(", OOM-killed" + p.limitNote())
	}
	if st.ExitCode == 124 || (st.ExitCode == 137 && p.lifetime > 0 && time.Since(p.started) >= p.lifetime) {
		fmt.Fprintf(&b, ", max lifetime of %s reached", p.lifetime)
	}
	if st.Error != "" {
		b.WriteString(": " + st.Error)
	}
	return b.String()
}

// newOOMKills reports whether the container's OOM-kill count grew since the last
// call. It reads the cgroup counter while the container runs, else the daemon's
// events. p.mu must be held.
func (p *Placement) newOOMKills(ctx context.Context) bool {
	var (
		n   uint64
		err = errors.New("no cgroup counter")
	)
	if p.oomFile != "" {
		n, err = readOOMKills(p.oomFile)
	}
	if err != nil {
		// The cgroup is gone once the container stops; the daemon still has the events.
		n, err = p.b.oomEvents(ctx, p.id, p.started)
		if err != nil {
			_, session := p.names()
			p.b.cfg.log.Warn("diagnose: count OOM kills failed", "session", session, "container", dockerapi.Short(p.id), "err", err)
			return false
		}
		if n < p.oomSeen {
			// The event buffer has forgotten kills the cgroup counted: nothing new.
			return false
		}
	}
	grew := n > p.oomSeen
	p.oomSeen = n
	return grew
}

// limitNote is " (memory limit 2.0 GiB)", " at the template's memory limit (256
// MiB)" when the session's template set it, or "" without a limit.
func (p *Placement) limitNote() string {
	switch {
	case p.memory <= 0:
		return ""
	case p.memTmpl:
		return " at the template's memory limit (" + formatBytes(p.memory) + ")"
	}
	return " (memory limit " + formatBytes(p.memory) + ")"
}
