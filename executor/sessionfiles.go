package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/workspace"
)

// SessionFiles is a session's files as the files API sees them: the host
// session directory (local, docker) or the kernel's own directory (a
// FileSyncer placement: remote, swarm), with the same results, error codes and
// limits. Executor.Files hands one to its function; it is valid only until that
// function returns, except that a reader Get returned stays valid until it is
// closed. Paths are relative to the session directory, checked with
// workspace.CheckFilePath's rules. Not safe for concurrent use.
type SessionFiles interface {
	// Put writes what r yields to path atomically (a temporary file renamed into
	// place, parents made) and returns the bytes written; see
	// workspace.Session.Put for its errors.
	Put(ctx context.Context, path string, r io.Reader, o api.PutOptions) (int64, error)

	// Get opens the regular file at path and returns a reader of it and its
	// size; see workspace.Session.Get for its errors. The caller must close it.
	Get(ctx context.Context, path string) (io.ReadCloser, int64, error)

	// List lists the directory at path ("" for the session directory); see
	// workspace.Session.List.
	List(ctx context.Context, path string, max int) (api.DirListing, error)

	// Remove deletes the file at path, or with recursive a directory; see
	// workspace.Session.Remove.
	Remove(ctx context.Context, path string, recursive bool) error
}

// FileLimits bound a FileSyncer's files API with the workspace's limits.
type FileLimits struct {
	// MaxFileBytes caps each upload: the workspace's per-file limit.
	MaxFileBytes int64
	// MaxSessionBytes is the session's byte budget: the workspace's disk quota
	// when one is set, else 0 (the placement's own default budget).
	MaxSessionBytes int64
}

// hostFiles is a session's host directory as SessionFiles.
type hostFiles struct{ ws *workspace.Session }

func (h hostFiles) Put(ctx context.Context, path string, r io.Reader, o api.PutOptions) (int64, error) {
	return h.ws.Put(ctx, path, r, o)
}

func (h hostFiles) Get(_ context.Context, path string) (io.ReadCloser, int64, error) {
	f, err := h.ws.Get(path)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("get %q: %w", path, err)
	}
	return f, fi.Size(), nil
}

func (h hostFiles) List(_ context.Context, path string, max int) (api.DirListing, error) {
	return h.ws.List(path, max)
}

func (h hostFiles) Remove(_ context.Context, path string, recursive bool) error {
	return h.ws.Remove(path, recursive)
}

// filesInKernel reports whether the backend's sessions keep their files in the
// kernel, where the files API must go through the kernel.
func (e *Executor) filesInKernel() bool {
	fb, ok := e.opts.Backend.(FileSyncingBackend)
	return ok && fb.SyncsFiles()
}

// fileLimits are the workspace's limits, for a FileSyncer's files.
func (e *Executor) fileLimits() FileLimits {
	quota, _ := e.opts.Workspace.DiskQuota()
	return FileLimits{MaxFileBytes: e.opts.Workspace.MaxFileBytes(), MaxSessionBytes: quota}
}

// runKernelFiles runs a jobFiles job whose files live in the kernel: the
// session's kernel is started (or reconnected) and set up first, as for a call.
// A reader Get returned is read by the caller after the job's function
// returned: the worker waits until it is closed (or the caller's context ends)
// before the next job, since it reads through the session's kernel connection.
func (s *session) runKernelFiles(j *job) {
	s.setState(api.StateBusy)
	err := s.ensureKernel(j)
	var kf FileSyncer
	if err == nil {
		var ok bool
		if kf, ok = s.k.placement.(FileSyncer); !ok {
			err = fmt.Errorf("%w (%s: its placements do not offer the kernel's files)", ErrFilesUnsupported, s.e.Backend())
		}
	}
	if syncer, ok := s.syncer(); err == nil && ok && s.k.fresh {
		ctx, cancel := context.WithTimeout(j.ctx, s.e.opts.StartTimeout)
		if err = syncer.PushInputs(ctx, s.k.conn, s.ws.Dir(), nil); err != nil {
			err = fmt.Errorf("%w: set up the session's files in the kernel: %w", api.ErrBackend, err)
		} else {
			s.k.fresh = false
		}
		cancel()
	}
	if err != nil {
		s.touch(nil)
		j.finish(nil, err)
		return
	}
	fs, err := kf.KernelFiles(s.k.conn, s.e.fileLimits())
	if err != nil {
		s.touch(nil)
		j.finish(nil, fmt.Errorf("%w: the session's files: %w", api.ErrBackend, err))
		return
	}
	ctx, cancel := context.WithCancel(j.ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	files := &lentFiles{SessionFiles: fs}
	err = s.closedDuring(j, j.files(ctx, files))
	j.finish(nil, err)
	files.wait(ctx)
	stop()
	cancel()
	s.touch(nil)
}

// lentFiles counts the readers its Get handed out that are still open.
type lentFiles struct {
	SessionFiles
	readers sync.WaitGroup
}

func (l *lentFiles) Get(ctx context.Context, path string) (io.ReadCloser, int64, error) {
	rc, n, err := l.SessionFiles.Get(ctx, path)
	if err != nil {
		return nil, 0, err
	}
	l.readers.Add(1)
	return &lentReader{ReadCloser: rc, done: l.readers.Done}, n, nil
}

// wait returns when every reader is closed or ctx ends (the reader then fails).
func (l *lentFiles) wait(ctx context.Context) {
	closed := make(chan struct{})
	go func() {
		l.readers.Wait()
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
}

type lentReader struct {
	io.ReadCloser
	once sync.Once
	done func()
}

// Seek seeks the reader lent when it can (see kernelfs's download), else fails
// with errors.ErrUnsupported.
func (r *lentReader) Seek(offset int64, whence int) (int64, error) {
	if s, ok := r.ReadCloser.(io.Seeker); ok {
		return s.Seek(offset, whence)
	}
	return 0, errors.ErrUnsupported
}

func (r *lentReader) Close() error {
	err := r.ReadCloser.Close()
	r.once.Do(r.done)
	return err
}
