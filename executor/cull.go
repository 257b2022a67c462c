package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// cullLoop hibernates sessions idle past their template's HibernateAfter (when they
// can), closes sessions idle past IdleTimeout, and closes sessions hibernated past
// HibernatedRetention.
func (e *Executor) cullLoop() {
	defer e.wg.Done()
	t := time.NewTicker(e.cullEvery())
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		e.mu.Lock()
		var idle, sleepy []*session
		for _, s := range e.sessions {
			switch {
			case s.asleep.Load():
				if r := e.opts.HibernatedRetention; r > 0 && s.hibernatedFor() > r {
					idle = append(idle, s)
				}
			case s.hibernating.Load():
			case s.tmpl.HibernateAfter > 0 && s.sleepFailed() == "" && s.idleFor() > s.tmpl.HibernateAfter:
				sleepy = append(sleepy, s)
			case s.tmpl.IdleTimeout > 0 && s.idleFor() > s.tmpl.IdleTimeout:
				idle = append(idle, s)
			}
		}
		for _, s := range idle {
			e.cullLocked(s, e.cullReason(s, s.sleepFailed()))
		}
		e.mu.Unlock()
		for _, s := range idle {
			e.closeCulled(s)
		}
		for _, s := range sleepy {
			s.hibernating.Store(true)
			e.wg.Add(1)
			go e.hibernateIdle(s)
		}
	}
}

// cullLocked takes a culled session out of the map and records why its state is
// gone; e.mu is held.
func (e *Executor) cullLocked(s *session, why string) {
	s.culled.Store(true)
	delete(e.sessions, s.id)
	e.retireLocked(s.id, s.tmpl.Name, why)
}

// cullReason says why a culled session's state is gone (failed: why it could not
// hibernate, "" when it was not tried).
func (e *Executor) cullReason(s *session, failed string) string {
	if s.asleep.Load() {
		return fmt.Sprintf("the session was hibernated for over %s and was closed; its snapshot was deleted, its files remain", e.opts.HibernatedRetention)
	}
	why := fmt.Sprintf("the session was idle for over %s and was closed; its variables are gone, its files remain", s.tmpl.IdleTimeout)
	if failed != "" {
		why = fmt.Sprintf("the session was idle for over %s and could not hibernate (%s), so it was closed; its variables are gone, its files remain", s.tmpl.IdleTimeout, failed)
	}
	return why
}

// closeCulled closes a session taken out of the map by the cull, keeping its files
// but not its snapshot.
func (e *Executor) closeCulled(s *session) {
	e.log.Info("closing idle session", "session", s.id, "idle_timeout", s.tmpl.IdleTimeout, "hibernated", s.asleep.Load())
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.ShutdownTimeout)
	defer cancel()
	_ = s.close(ctx, false)
	for _, name := range []string{SnapshotFile, CheckpointFile} {
		snap := filepath.Join(e.opts.Workspace.Root(), "sessions", s.id, name)
		if err := os.Remove(snap); err != nil && !errors.Is(err, os.ErrNotExist) {
			e.log.Warn("removing a closed session's snapshot", "session", s.id, "file", name, "err", err)
		}
	}
}

// hibernateIdle hibernates an idle session on its worker; a session that cannot
// hibernate (R, too big, a backend that cannot) is closed at its IdleTimeout as an
// idle one was before hibernation existed, and its next call is told why.
func (e *Executor) hibernateIdle(s *session) {
	defer e.wg.Done()
	defer s.hibernating.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.SnapshotTimeout+e.opts.ShutdownTimeout)
	defer cancel()
	var err error
	runErr := s.runFunc(ctx, opHibernate, func(s *session, _ *job) error {
		if time.Since(s.info().LastActivity) < s.tmpl.HibernateAfter {
			return nil // a call ran since the cull looked: not idle any more
		}
		_, err = s.hibernateCapped(s.ctx)
		return nil
	})
	if runErr != nil || err == nil {
		return
	}
	// Not tried again until a call changes the namespace: the session is closed
	// at its IdleTimeout, as before hibernation, told why it did not hibernate.
	e.log.Info("idle session could not hibernate; it is closed at its idle timeout", "session", s.id, "err", err)
	s.mu.Lock()
	s.noSleep = err.Error()
	s.mu.Unlock()
}

// sleepFailed is why the session's last idle hibernation failed ("" when it did
// not, or a call ran since).
func (s *session) sleepFailed() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.noSleep
}

// cullEvery is how often idle sessions are looked for: a quarter of the shortest
// idle timeout (or hibernate-after) of any template, between 1 s and 1 min; 0 when
// no template has one.
func (e *Executor) cullEvery() time.Duration {
	var shortest time.Duration
	for _, t := range e.templates {
		for _, d := range []time.Duration{t.IdleTimeout, t.HibernateAfter} {
			if d > 0 && (shortest == 0 || d < shortest) {
				shortest = d
			}
		}
	}
	if shortest == 0 {
		return 0
	}
	return min(max(shortest/4, time.Second), time.Minute)
}
