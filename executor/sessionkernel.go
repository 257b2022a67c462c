package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/kernelbox/kernelbox/api"
)

// A session's kernel when a job needs one: the one it has, reconnected or
// recovered; a warm one of its template's pool; or a new one (restoring a
// hibernated or forked session's snapshot in it).

// ensureKernel makes sure the session has a live kernel connection, reconnecting or
// starting a fresh kernel as needed.
func (s *session) ensureKernel(j *job) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.e.opts.StartTimeout)
	defer cancel()
	if !j.deadline.IsZero() {
		var cancelWait context.CancelFunc
		ctx, cancelWait = context.WithDeadline(ctx, j.deadline)
		defer cancelWait()
	}
	if ok, err := s.kernelReady(ctx); ok || err != nil {
		return err
	}
	if err := s.e.recheckData(s.tmpl); err != nil { // datacheck.go
		return err
	}
	if ok, err := s.fromPool(ctx); ok || err != nil {
		return err
	}
	if err := s.openWorkspace(); err != nil {
		return err
	}
	if s.k != nil {
		// The connection ended since the last call: the kernel died, or the
		// connection dropped, or the server or container went away.
		s.setState(api.StateStarting)
		ok, why := s.k.recover(ctx, s.e)
		if why != "" {
			s.e.opts.Observer.KernelDied()
			s.markLost(why)
		}
		if ok {
			s.setKernel(s.k)
			return nil
		}
		s.markLost("the kernel died or its server went away after the previous call")
		_ = s.k.shutdown(ctx, s.e.opts.ShutdownTimeout)
		s.setKernel(nil)
	}
	if s.asleep.Load() {
		if err := s.e.roomToWake(s); err != nil {
			return err
		}
	}
	j.emit(api.Event{Type: "status", State: "starting"})
	s.setState(api.StateStarting)
	k, err := s.e.acquireKernel(ctx, s)
	if err != nil {
		if s.sleep != nil { // still hibernated, its snapshot untouched
			s.waking.Store(false)
			s.setState(api.StateHibernated)
		} else {
			s.setState(api.StateDead)
		}
		if errors.Is(err, api.ErrDisabled) {
			return err
		}
		if s.ctx.Err() != nil {
			return fmt.Errorf("%w: %q", api.ErrSessionClosed, s.id)
		}
		return fmt.Errorf("%w: start kernel for session %q on %s: %w", api.ErrBackend, s.id, s.e.Backend(), err)
	}
	if s.everAlive && s.sleep == nil {
		s.markLost("the session's kernel was replaced")
	}
	s.everAlive = true
	s.setKernel(k)
	if s.sleep != nil {
		s.setState(api.StateRestoring)
		return s.restore(ctx)
	}
	return nil
}

// fromPool gives the session a warm kernel of its template's pool when one is
// ready and the session has neither kernel nor directory open: a new session takes
// it with its warm directory; a hibernated (or forked) one takes it with its own
// files moved into that directory, and its snapshot is restored there, as after a
// cold start. It reports false when the session has to start a kernel of its own.
func (s *session) fromPool(ctx context.Context) (bool, error) {
	p := s.e.pools[s.tmpl.Name]
	if p == nil || s.k != nil || s.ws != nil {
		return false, nil
	}
	if s.sleep == nil {
		ws, k := p.take(ctx, s.id)
		if k == nil {
			return false, nil
		}
		s.ws = ws
		s.everAlive = true
		s.setKernel(k)
		return true, nil
	}
	if s.asleep.Load() {
		if err := s.e.roomToWake(s); err != nil {
			return false, err
		}
	}
	// Counted as a running call, so that the pool's refill (a kernel start, which
	// takes a core) waits for the restore instead of slowing it (pool.awaitTurn).
	s.e.running.Add(1)
	defer s.e.running.Add(-1)
	ws, k := p.takeFiles(ctx, s.id)
	if k == nil {
		return false, nil
	}
	s.ws = ws
	s.noteEvicted(ws)
	s.everAlive = true
	s.setKernel(k)
	s.setState(api.StateRestoring)
	return true, s.restore(ctx)
}

// openWorkspace opens the session directory unless the warm pool already did.
func (s *session) openWorkspace() error {
	if s.ws != nil {
		return nil
	}
	ws, err := s.e.opts.Workspace.Open(s.id)
	if err != nil {
		return fmt.Errorf("open session directory: %w", err)
	}
	s.ws = ws
	s.noteEvicted(ws)
	if reused, n := ws.Reused(); reused && !s.everAlive && s.sleep == nil {
		// The files outlived an earlier kernel of this id (a kernelbox restart):
		// kept by design, but its variables are gone.
		s.markLost(fmt.Sprintf("the session's directory is from an earlier kernel of this session (before a restart of kernelbox, or a close for being idle): its files are kept (%d in outputs/, not reported as this call's artifacts), its variables are gone", n))
	}
	return nil
}
