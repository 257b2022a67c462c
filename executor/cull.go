package executor

import (
	"context"
	"fmt"
	"time"
)

// cullLoop closes sessions idle for longer than IdleTimeout.
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
		var idle []*session
		for _, s := range e.sessions {
			if it := s.tmpl.IdleTimeout; it > 0 && s.idleFor() > it {
				idle = append(idle, s)
			}
		}
		for _, s := range idle {
			s.culled.Store(true)
			delete(e.sessions, s.id)
			e.retireLocked(s.id, fmt.Sprintf("the session was idle for over %s and was closed; its variables are gone, its files remain", s.tmpl.IdleTimeout))
		}
		e.mu.Unlock()
		for _, s := range idle {
			e.log.Info("closing idle session", "session", s.id, "idle_timeout", s.tmpl.IdleTimeout)
			ctx, cancel := context.WithTimeout(context.Background(), e.opts.ShutdownTimeout)
			_ = s.close(ctx, false)
			cancel()
		}
	}
}

// cullEvery is how often idle sessions are looked for: a quarter of the shortest
// idle timeout of any template, between 1 s and 1 min; 0 when no template has one.
func (e *Executor) cullEvery() time.Duration {
	var shortest time.Duration
	for _, t := range e.templates {
		if t.IdleTimeout > 0 && (shortest == 0 || t.IdleTimeout < shortest) {
			shortest = t.IdleTimeout
		}
	}
	if shortest == 0 {
		return 0
	}
	return min(max(shortest/4, time.Second), time.Minute)
}
