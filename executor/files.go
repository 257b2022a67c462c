package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/paths"
)

// ErrFilesUnsupported: the session's kernel does not see the host session
// directory and its placement does not offer the kernel's files (it is not a
// FileSyncer), so the files API would not reach them.
var ErrFilesUnsupported = fmt.Errorf("%w: the files API is not available for this session's backend", api.ErrInvalidRequest)

// FileSyncingBackend is implemented by backends whose kernels do not see the
// host session directory, only what a FileSyncer placement copies (the remote
// and swarm backends). The files API goes through the kernel for their
// sessions (their placements are FileSyncers).
type FileSyncingBackend interface {
	SyncsFiles() bool
}

// Files runs fn with the session's files, as a job on the session's worker:
// after the calls queued before it and before those queued after, so an upload
// followed by an execute is seen by the code, and nothing else touches the
// workspace.Session meanwhile. fn gets ctx, canceled as well when the session
// closes; it must not keep files, except a reader from files.Get, which it
// must close (for a session whose files live in the kernel, the worker waits
// for that: the reader reads through the kernel's connection).
//
// op says whether fn reads or writes files, which the permission policy must
// allow (files.read, files.write: a denial is api.ErrDenied and nothing is done),
// and, with op.Create, that a session that does not exist yet is created, as
// Execute does (its kernel starts with its first call); otherwise a missing
// session is api.ErrNotFound. The session's first call after a Files that opened
// its directory starts a fresh kernel rather than taking a warm one. For a
// backend whose kernels do not see the host directory (remote, swarm), the files
// are the kernel's: Files starts the session's kernel if it has none, as a call
// would, and fails with api.ErrBackend when it cannot. Files fails with the errors
// of Execute's session lookup (api.ErrInvalidRequest, api.ErrTooManySessions,
// api.ErrQueueFull, api.ErrSessionClosed, api.ErrClosed).
func (e *Executor) Files(ctx context.Context, id string, op FileOp, fn func(ctx context.Context, files SessionFiles) error) error {
	create := op.Create
	if err := paths.CheckSessionID(id); err != nil {
		return fmt.Errorf("%w: %w", api.ErrInvalidRequest, err)
	}
	if err := e.checkFiles(ctx, id, op); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		var s *session
		var err error
		if create {
			s, err = e.session(ctx, id, "")
		} else {
			s, err = e.lookup(id)
		}
		if err != nil {
			return err
		}
		j := newJob(ctx, jobFiles, api.Request{SessionID: id}, nil, nil, time.Now())
		j.files = fn
		if err = s.enqueue(j); err == nil {
			_, err = j.wait()
			if err == nil || !j.notRun || !s.culled.Load() || !create {
				return err
			}
		}
		if !errors.Is(err, api.ErrSessionClosed) || attempt >= 2 || !create {
			return err
		}
	}
}

// runFiles runs a jobFiles job on the worker. The session's state stays what it
// was (a session with only files has no kernel and stays "new"), busy while
// the job runs so that idle culling leaves it alone.
func (s *session) runFiles(j *job) {
	if s.e.filesInKernel() {
		s.runKernelFiles(j)
		return
	}
	prev := s.snapshot().State
	s.setState(api.StateBusy)
	err := s.files(j)
	s.setState(prev)
	s.touch(nil)
	j.finish(nil, err)
}

func (s *session) files(j *job) error {
	if _, ok := s.syncer(); ok {
		return ErrFilesUnsupported
	}
	if err := s.openWorkspace(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(j.ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	return s.closedDuring(j, j.files(ctx, hostFiles{s.ws}))
}

// closedDuring returns err, the error of a files job's function, unless the
// session's close cut it (its context ended while the caller's did not): then
// it is api.ErrSessionClosed (session_closed), not the context.Canceled the work
// ended with, which front ends answer as a caller that went away (499). A
// caller that went away keeps its context's error.
func (s *session) closedDuring(j *job, err error) error {
	if err == nil || !errors.Is(err, context.Canceled) || j.ctx.Err() != nil || s.ctx.Err() == nil {
		return err
	}
	return fmt.Errorf("%w: %q was closed during the files operation (%v)", api.ErrSessionClosed, s.id, err)
}
