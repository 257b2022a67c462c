package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/kernelbox/kernelbox/api"
)

// runFunc runs fn as a job on the session's worker, after the jobs queued before
// it, and returns its error. A caller whose ctx ends while the job is queued gets
// ctx's error and the job does not run; once it runs, it is bounded by the
// session's own life, not by ctx.
func (s *session) runFunc(ctx context.Context, op string, fn func(*session, *job) error) error {
	j := newJob(ctx, jobFunc, api.Request{SessionID: s.id}, nil, nil, time.Now())
	j.fn = func(s *session) error { return fn(s, j) }
	j.opName = op
	if err := s.enqueue(j); err != nil {
		return err
	}
	_, err := j.wait()
	return err
}

// Hibernate saves session id's namespace to a snapshot in its directory, then stops
// its kernel (and container) and frees its place among MaxSessions: the session
// stays listed as hibernated (with the snapshot's size and names), and its next call
// (or Resume) starts a kernel and restores the namespace in it before the call runs.
// It waits for the calls queued before it, a running one included. A session that
// cannot be saved whole stays live, with an error wrapping api.ErrSnapshotTooLarge (over
// its snapshot limit or disk quota) or api.ErrCannotHibernate (not Python, a backend
// whose kernels keep their files elsewhere, no kernel, the save failed).
// Hibernating a hibernated session returns it as it is.
func (e *Executor) Hibernate(ctx context.Context, id string) (api.SessionInfo, error) {
	s, err := e.lookup(id)
	if err != nil {
		return api.SessionInfo{}, err
	}
	err = s.runFunc(ctx, opHibernate, func(s *session, _ *job) error {
		_, err := s.hibernateCapped(s.ctx)
		return err
	})
	return s.info(), err
}

// Resume starts a hibernated session's kernel and restores its namespace now, rather
// than at its next call. A session that is not hibernated is left alone (Resumed
// false). A snapshot that cannot be read (truncated, corrupted, another format)
// starts the kernel empty: StateLost with the reason, which the next call reports
// too. It fails like a call's kernel start does (api.ErrBackend, api.ErrSessionClosed).
func (e *Executor) Resume(ctx context.Context, id string) (api.ResumeResult, error) {
	s, err := e.lookup(id)
	if err != nil {
		return api.ResumeResult{}, err
	}
	var res api.ResumeResult
	err = s.runFunc(ctx, "", func(s *session, j *job) error { // a kernel start, as a call's own
		if s.sleep == nil {
			return nil
		}
		res.Resumed = true
		if err := s.ensureKernel(j); err != nil {
			return err
		}
		res.StateRestored = s.takeRestored()
		res.StateLost, res.Reason = s.lost, s.lostWhy
		return nil
	})
	res.Session = s.info()
	return res, err
}

// checkDurableBounds refuses negative durable-session bounds (a negative
// MaxHibernated would refuse every hibernate; a negative timeout ends each save
// at once), naming the flag that sets each.
func checkDurableBounds(o *Options) error {
	switch {
	case o.MaxHibernated < 0:
		return fmt.Errorf("executor: Options.MaxHibernated (--max-hibernated) is %d; want 1 or more (0 is the default, 1,000)", o.MaxHibernated)
	case o.SnapshotTimeout < 0:
		return fmt.Errorf("executor: Options.SnapshotTimeout (--snapshot-timeout) is %s; want a positive duration (0 is the default, 2m)", o.SnapshotTimeout)
	case o.RestoreTimeout < 0:
		return fmt.Errorf("executor: Options.RestoreTimeout is %s; want a positive duration (0 is the default, 10m)", o.RestoreTimeout)
	}
	return nil
}

// hibernatedCount is the number of hibernated sessions.
func (e *Executor) hibernatedCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, s := range e.sessions {
		if s.asleep.Load() {
			n++
		}
	}
	return n
}

// liveCount is the number of sessions that hold (or may start) a kernel: every
// session but the hibernated ones, counting those waking up. e.mu is held.
func (e *Executor) liveCountLocked() int {
	n := 0
	for _, s := range e.sessions {
		if !s.asleep.Load() || s.waking.Load() {
			n++
		}
	}
	return n
}

// roomToWake takes a place among MaxSessions for hibernated session s, which is
// about to start a kernel, or fails with api.ErrTooManySessions when there is none.
// The count and the taking are one step under e.mu, so that resumes at once cannot
// all pass the check (issue 46 item 7); the place is s's until it wakes
// (session.wake) or goes back to sleep (s.waking cleared).
func (e *Executor) roomToWake(s *session) error {
	if s.waking.Load() {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := e.liveCountLocked(); n >= e.opts.MaxSessions {
		return fmt.Errorf("%w: %d sessions are live, the limit; hibernated session %q stays hibernated until one is closed or hibernated",
			api.ErrTooManySessions, n, s.id)
	}
	s.waking.Store(true)
	return nil
}
