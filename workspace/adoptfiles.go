package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kernelbox/kernelbox/internal/paths"
)

// AdoptFiles gives the warm session s the id id of a session directory that
// exists already (a hibernated session's, whose files and snapshot are there), and
// returns the Session to use from now on; s itself is closed. A kernel running in
// the warm directory keeps working in it (as with Adopt), and finds the session's
// files there.
//
// Under the manager's lock each top-level entry of sessions/<id> is renamed into the
// warm directory (the same file system: nothing is copied, no link is followed, a
// symbolic link is moved as itself), then the warm directory is renamed over the
// emptied sessions/<id>. An empty directory of the warm one (inputs/, outputs/) is
// replaced by the session's entry of that name; under data/ the warm directory's
// copies of the template's data are kept and the session's older copies of the same
// names deleted, as a new kernel's copy would replace them; anything else in both is
// ErrConflict. On any failure every entry is put back where it was and s stays warm
// and usable; an error wrapping ErrStranded says that putting back failed too.
//
// The returned Session is a reopened one (Reused): the files its outputs/ held are
// not reported by its first Collect. AdoptFiles is refused with ErrOwnDisk when
// sessions have disks of their own (Options.DiskQuota): moving files between two
// disks would be a copy. It fails with fs.ErrNotExist when sessions/<id> is
// missing, ErrNotWarm and ErrClosed as Adopt does.
func (m *Manager) AdoptFiles(s *Session, id string) (*Session, error) {
	if err := paths.CheckSessionID(id); err != nil {
		return nil, fmt.Errorf("adopt files: %w", err)
	}
	if s == nil || s.m != m || !strings.HasPrefix(s.id, warmPrefix) || s.root == nil {
		return nil, fmt.Errorf("adopt the files of %q: %w", id, ErrNotWarm)
	}
	ns, trash, err := m.adoptFilesLocked(s, id)
	if trash != "" {
		if rerr := removeTree(m.sessions, trash); rerr != nil {
			m.log.Warn("could not remove a resumed session's old data copies", "dir", trash, "err", rerr)
		}
	}
	if err != nil {
		return nil, err
	}
	// As openSession does for a directory that was there before.
	if err := ns.init(); err != nil {
		ns.log.Warn("adopted files: inputs/ or outputs/", "err", err)
	}
	if ns.first {
		ns.sweepTemps()
	}
	ns.leftover = ns.baseline()
	return ns, nil
}

// adoptFilesLocked moves the files under m.mu (see AdoptFiles) and returns the
// new Session, and the trash name of the old data copies to delete once the lock
// is released.
func (m *Manager) adoptFilesLocked(s *Session, id string) (*Session, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions == nil {
		return nil, "", ErrClosed
	}
	wrap := func(err error) error {
		return fmt.Errorf("adopt the files of %q into warm session %s: %w", id, s.id, err)
	}
	if m.disks.on() {
		return nil, "", wrap(ErrOwnDisk)
	}
	old, err := openDir(m.sessions, id)
	if err != nil {
		return nil, "", wrap(err)
	}
	defer old.Close()
	mv, err := newMover(m.sessions, old, s.root, m.adoptRename)
	if err != nil {
		return nil, "", wrap(err)
	}
	defer mv.close()
	err = mv.moveAll()
	if err == nil {
		err = mv.replace(s.id, id)
	}
	if err != nil {
		if uerr := mv.undo(); uerr != nil {
			m.log.Error("a failed resume could not put the session's files back: some are in the warm directory",
				"session", id, "warm", s.id, "err", uerr)
			return nil, "", wrap(fmt.Errorf("%w (%s): %w; undoing: %w", ErrStranded, filepath.Join(m.sessionsDir, s.id), err, uerr))
		}
		return nil, "", wrap(err)
	}
	if m.open[s.id]--; m.open[s.id] <= 0 {
		delete(m.open, s.id)
	}
	first := m.open[id] == 0
	m.takeEvicted(id)
	m.openedDir(id)
	m.log.Debug("adopted a session's files into a warm session", "session", id, "warm", s.id, "entries", mv.moved)
	ns := &Session{
		m:        m,
		id:       id,
		dir:      filepath.Join(m.sessionsDir, id),
		log:      m.log.With("session", id),
		root:     s.root,
		staged:   map[string]int64{},
		restaged: map[string]restage{},
		seen:     map[string]fileState{},
		reused:   true,
		first:    first,
	}
	if s.art != nil {
		s.art.Close()
	}
	s.root, s.art = nil, nil
	return ns, mv.trash, nil
}

// mover moves a session directory's entries into a warm directory, recording how
// to undo each step. Every operation is by directory descriptor and single name.
type mover struct {
	sessions, old, warm *os.File
	renameAt            func(from int, name string, to int, newName string) error
	steps               []func() error // undo, last first
	moved               int
	trash               string // where the session's data copies went ("" if nowhere)
}

// newMover returns a mover from old into warm, both under sessions, that renames
// with renameAt (nil: renameNoReplace).
func newMover(sessions, old, warm *os.Root, renameAt func(int, string, int, string) error) (*mover, error) {
	mv := mover{renameAt: renameAt}
	if mv.renameAt == nil {
		mv.renameAt = renameNoReplace
	}
	var err error
	if mv.sessions, err = sessions.Open("."); err != nil {
		return nil, err
	}
	if mv.old, err = old.Open("."); err == nil {
		mv.warm, err = warm.Open(".")
	}
	if err != nil {
		mv.close()
		return nil, err
	}
	return &mv, nil
}

func (mv *mover) close() {
	for _, f := range []*os.File{mv.sessions, mv.old, mv.warm} {
		if f != nil {
			f.Close()
		}
	}
}

// fd returns f's descriptor. Fd is safe here: a directory is never in the poller.
func fd(f *os.File) int { return int(f.Fd()) }

// moveAll moves every top-level entry of the old directory into the warm one.
func (mv *mover) moveAll() error {
	names, err := mv.old.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := mv.moveEntry(fd(mv.old), fd(mv.warm), name, true); err != nil {
			return err
		}
	}
	return nil
}

// moveEntry renames name from directory from to directory to. When to has name
// already: an empty directory there is replaced; data/ (top, two directories) is
// merged; anything else is ErrConflict.
func (mv *mover) moveEntry(from, to int, name string, top bool) error {
	var st unix.Stat_t
	err := unix.Fstatat(to, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return mv.rename(from, name, to, name)
	case err != nil:
		return &fs.PathError{Op: "stat", Path: name, Err: err}
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%w: %q", ErrConflict, name)
	}
	if top && name == "data" {
		if merged, err := mv.mergeData(from, to); merged || err != nil {
			return err
		}
	}
	if err := unix.Unlinkat(to, name, unix.AT_REMOVEDIR); err != nil {
		if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("%w: %q (not empty in the warm directory)", ErrConflict, name)
		}
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	mv.steps = append(mv.steps, func() error { return remakeDir(to, name, &st) })
	return mv.rename(from, name, to, name)
}

// rename renames and records the way back.
func (mv *mover) rename(from int, name string, to int, newName string) error {
	if err := mv.renameAt(from, name, to, newName); err != nil {
		return &fs.PathError{Op: "rename", Path: name, Err: err}
	}
	mv.moved++
	mv.steps = append(mv.steps, func() error {
		if err := mv.renameAt(to, newName, from, name); err != nil {
			return &fs.PathError{Op: "put back", Path: name, Err: err}
		}
		return nil
	})
	return nil
}

// mergeData merges the session's data/ into the warm one's when both are
// directories: the session's entries that the warm data/ lacks move into it (what
// the code put there), the rest (older copies of the template's data) go with the
// emptied-of-the-rest data/ to a trash name in sessions/. merged is false when
// the session's data/ is not a directory.
func (mv *mover) mergeData(from, to int) (merged bool, err error) {
	const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY
	srcFD, err := paths.OpenBeneath(from, "data", dirFlags)
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, paths.ErrLinkInPath) {
		return false, nil // a file or a link: not merged, not followed
	}
	if err != nil {
		return false, &fs.PathError{Op: "open", Path: "data", Err: err}
	}
	src := os.NewFile(uintptr(srcFD), "data")
	defer src.Close()
	dstFD, err := paths.OpenBeneath(to, "data", dirFlags)
	if err != nil {
		return false, &fs.PathError{Op: "open", Path: "data", Err: err}
	}
	dst := os.NewFile(uintptr(dstFD), "data")
	defer dst.Close()
	names, err := src.Readdirnames(-1)
	if err != nil {
		return false, err
	}
	for _, n := range names {
		if err := unix.Fstatat(fd(dst), n, new(unix.Stat_t), unix.AT_SYMLINK_NOFOLLOW); err == nil {
			continue // the template's data: the warm copy is kept
		}
		if err := mv.rename(fd(src), n, fd(dst), n); err != nil {
			return false, err
		}
	}
	mv.trash = trashPrefix + randomSuffix()
	return true, mv.rename(from, "data", fd(mv.sessions), mv.trash)
}

// replace renames the warm directory over the emptied session directory (a
// rename replaces an empty directory; one not empty fails with ENOTEMPTY).
func (mv *mover) replace(warm, id string) error {
	if err := unix.Renameat(fd(mv.sessions), warm, fd(mv.sessions), id); err != nil {
		return &fs.PathError{Op: "rename", Path: warm, Err: err}
	}
	return nil
}

// undo takes the recorded steps back, last first, and joins what failed.
func (mv *mover) undo() error {
	var errs []error
	for i := len(mv.steps) - 1; i >= 0; i-- {
		if err := mv.steps[i](); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// remakeDir makes the empty directory name in dir again, with st's mode and,
// when this process may, its owner.
func remakeDir(dir int, name string, st *unix.Stat_t) error {
	if err := unix.Mkdirat(dir, name, 0o700); err != nil {
		return &fs.PathError{Op: "mkdir", Path: name, Err: err}
	}
	if os.Geteuid() == 0 {
		_ = unix.Fchownat(dir, name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW)
	}
	return unix.Fchmodat(dir, name, uint32(st.Mode&0o7777), 0)
}

// renameChecked is renameNoReplace by a check before the rename.
func renameChecked(from int, name string, to int, newName string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(to, newName, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		return unix.EEXIST
	} else if !errors.Is(err, unix.ENOENT) {
		return err
	}
	return unix.Renameat(from, name, to, newName)
}
