package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kernelbox/kernelbox/api"
)

// Fork makes session newID a copy of session id as it is now: the same template,
// a copy of its files and its namespace, restored in newID's own new kernel. The
// original is untouched and keeps its kernel (a hibernated original stays
// hibernated). It waits for the original's queued calls, then holds the original
// while its namespace is saved and its files copied; newID's kernel then starts and
// restores the namespace before Fork returns. newID must not be a live session, and
// no earlier session of that id may have left files. It fails as Hibernate does
// when the original cannot be saved (ErrCannotHibernate, ErrSnapshotTooLarge);
// newID is then closed and its directory removed.
func (e *Executor) Fork(ctx context.Context, id, newID string) (api.ResumeResult, error) {
	if !api.ValidSessionID(newID) {
		return api.ResumeResult{}, invalidf("invalid session id %q: use %s", clip(newID, 80), api.SessionIDRule)
	}
	if e.disabled != nil {
		return api.ResumeResult{}, e.disabled
	}
	src, err := e.lookup(id)
	if err != nil {
		return api.ResumeResult{}, err
	}
	e.mu.Lock()
	_, exists := e.sessions[newID]
	e.mu.Unlock()
	dstDir := filepath.Join(e.opts.Workspace.Root(), "sessions", newID)
	if _, serr := os.Lstat(dstDir); exists || serr == nil {
		return api.ResumeResult{}, invalidf("cannot fork into %q: a session of that id exists or left files (close it first)", newID)
	}
	dst, err := e.session(ctx, newID, src.tmpl.Name)
	if err != nil {
		return api.ResumeResult{}, err
	}
	err = src.runFunc(ctx, func(src *session, _ *job) error { return src.forkInto(ctx, dst) })
	if errors.Is(err, errForkTaken) {
		return api.ResumeResult{}, invalidf("cannot fork into %q: a call created that session meanwhile", newID)
	}
	if err != nil {
		if cerr := e.CloseSession(context.WithoutCancel(ctx), newID); cerr != nil && !errors.Is(cerr, ErrNoSession) {
			err = errors.Join(err, cerr)
		}
		return api.ResumeResult{}, err
	}
	return e.Resume(ctx, newID)
}

// errForkTaken: a call created the fork's new session before the fork could fill
// it; the session is that call's, and is left alone.
var errForkTaken = errors.New("fork: the new session was taken")

// forkInto runs on src's worker: it saves src's namespace (unless src is
// hibernated, when its snapshot is on disk already) and has dst's worker copy src's
// files, snapshot included, into dst's directory.
func (s *session) forkInto(ctx context.Context, dst *session) error {
	info := api.SnapshotInfo{}
	if s.sleep != nil {
		info = s.sleep.info
	} else {
		i, err := s.saveSnapshot(s.ctx)
		if err != nil {
			return err
		}
		info = *i
		defer func() {
			if err := os.Remove(filepath.Join(s.ws.Dir(), SnapshotFile)); err != nil {
				s.log.Warn("fork: removing the snapshot", "err", err)
			}
		}()
	}
	srcDir := filepath.Join(s.e.opts.Workspace.Root(), "sessions", s.id)
	from := "fork:" + s.id
	return dst.runFunc(ctx, func(d *session, _ *job) error {
		if d.everAlive || d.ws != nil {
			return errForkTaken // a call on the new id came first
		}
		if err := d.openWorkspace(); err != nil {
			return err
		}
		if err := copyTree(srcDir, d.ws.Dir(), s.e.forkCopyLimit()); err != nil {
			return fmt.Errorf("fork: copy the session's files: %w", err)
		}
		// Opened again, the directory takes what was copied as files that were
		// there before (not the first call's artifacts).
		_ = d.ws.Close()
		d.ws = nil
		d.sleep = &sleepState{info: info, from: from}
		return nil
	})
}

// forkCopyLimit bounds the bytes a fork copies: the disk quota a session has,
// else 8 GiB. Without it a session's sparse file (1 TB that takes no space) would
// be copied dense onto the host's disk.
func (e *Executor) forkCopyLimit() int64 {
	if q, _ := e.opts.Workspace.DiskQuota(); q > 0 {
		return q
	}
	return 8 << 30
}

// copyTree copies the regular files and directories under src into dst, which
// exists, at most limit bytes in all (apparent sizes: a sparse file counts in
// full). Symbolic links, devices, FIFOs and sockets are not copied, nor data/ (the
// template's data mounts, which the new session gets as its own) nor a snapshot's
// temporary files. Errors from the disk (a full quota) are returned.
func copyTree(src, dst string, limit int64) error {
	root, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer root.Close()
	left := limit
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if p == "data" || p == CheckpointFile || strings.HasPrefix(d.Name(), SnapshotFile+".tmp-") || strings.HasPrefix(d.Name(), CheckpointFile+".tmp-") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, filepath.FromSlash(p))
		switch {
		case d.IsDir():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			return sameOwner(target, fi)
		case d.Type().IsRegular():
			return copyFile(root, p, target, &left, limit)
		}
		return nil
	})
}

// sameOwner gives target the owner of the file fi describes, when this process may
// (as root): a docker kernel runs as its own user and must be able to write the
// copies of the files it wrote.
func sameOwner(target string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || os.Geteuid() != 0 {
		return nil
	}
	return os.Lchown(target, int(st.Uid), int(st.Gid))
}

// copyFile copies the regular file name under root to target and takes its size
// from *left. A file swapped for a FIFO or device since the walk saw it is left
// out (opened without blocking, checked after the open), and one that grows while
// it is copied is copied only up to what was left.
func copyFile(root *os.Root, name, target string, left *int64, limit int64) error {
	in, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	if fi.Size() > *left {
		return fmt.Errorf("%w: the session's files are over %d bytes (apparent sizes: a sparse file counts in full)", ErrSnapshotTooLarge, limit)
	}
	*left -= fi.Size()
	out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.LimitReader(in, fi.Size())); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return sameOwner(target, fi)
}
