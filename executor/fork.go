package executor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/workspace"
)

// Fork makes session newID a copy of session id as it is now: the same template,
// a copy of its files and its namespace, restored in newID's own new kernel. The
// original is untouched and keeps its kernel (a hibernated original stays
// hibernated). It waits for the original's queued calls, then holds the original
// while its namespace is saved and its files copied; newID's kernel then starts and
// restores the namespace before Fork returns. newID must not be a live session, and
// no earlier session of that id may have left files. It fails as Hibernate does
// when the original cannot be saved (api.ErrCannotHibernate, api.ErrSnapshotTooLarge);
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
	err = src.runFunc(ctx, "fork", func(src *session, _ *job) error { return src.forkInto(ctx, dst) })
	if errors.Is(err, errForkTaken) {
		return api.ResumeResult{}, invalidf("cannot fork into %q: a call created that session meanwhile", newID)
	}
	if err != nil && src.ctx.Err() != nil && ctx.Err() == nil {
		// The source was closed (DELETE) while the fork waited for it or saved
		// it: as if it had not existed, not a client that went away.
		err = fmt.Errorf("no such session %q: it was closed while it was being forked: %w", id, api.ErrNotFound)
	}
	if err != nil {
		if cerr := e.CloseSession(context.WithoutCancel(ctx), newID); cerr != nil && !errors.Is(cerr, api.ErrNotFound) {
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
	// A hibernated session's directory is closed, and with a disk quota its
	// disk unmounted: it is opened (mounted) for the copy, which would
	// otherwise copy an empty mount point (issue 46 item 5).
	src := s.ws
	if src == nil {
		ws, err := s.e.opts.Workspace.Open(s.id)
		if err != nil {
			return fmt.Errorf("fork: open the hibernated session's directory: %w", err)
		}
		defer ws.Close()
		src = ws
	}
	from := "fork:" + s.id
	return dst.runFunc(ctx, "fork's copy", func(d *session, _ *job) error {
		if d.everAlive || d.ws != nil {
			return errForkTaken // a call on the new id came first
		}
		if err := d.openWorkspace(); err != nil {
			return err
		}
		err := s.e.opts.Workspace.CopyTree(src, d.ws, workspace.CopyOptions{Limit: s.e.forkCopyLimit(), Skip: forkSkip})
		if errors.Is(err, workspace.ErrTooLarge) {
			err = fmt.Errorf("%w: %w", api.ErrSnapshotTooLarge, err)
		}
		if err != nil {
			return fmt.Errorf("fork: copy the session's files: %w", err)
		}
		// Opened again, the directory takes what was copied as files that were
		// there before (not the first call's artifacts).
		d.e.opts.Workspace.Pin(d.id) // its snapshot is in it (see hibernate)
		_ = d.ws.Close()
		d.ws = nil
		d.sleep = &sleepState{info: info, from: from}
		// Listed with its snapshot until the restore is whole: a kill in the
		// middle takes it back hibernated, never half-loaded (restore).
		d.mu.Lock()
		d.state.Snapshot = &info
		d.mu.Unlock()
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

// forkSkip leaves out of a fork's copy what is not the session's files: data/ (the
// template's data mounts, which the new session gets as its own), the checkpoint
// (a fork does not copy it) and the temporary files of saves.
func forkSkip(rel string, d fs.DirEntry) bool {
	return rel == "data" || rel == CheckpointFile ||
		strings.HasPrefix(d.Name(), SnapshotFile+".tmp-") || strings.HasPrefix(d.Name(), CheckpointFile+".tmp-")
}
