package workspace

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/kernelbox/kernelbox/internal/paths"
	"golang.org/x/sys/unix"
)

// Deleting a directory tree the kernel made. The kernel controls every name in
// it and may rename or replace directories while the delete runs, and it can nest
// directories far deeper than PATH_MAX (21,000 levels, by chdir-ing down): a
// delete that holds a descriptor per level, as a recursive one does, runs out of
// descriptors ("too many open files") on such a chain. removeAllAt holds at most
// maxHeldDirs directories open at once: a directory found deeper than that is
// renamed, with its subtree, to the top of the tree being deleted (a rename inside
// one file system moves the whole subtree at once), where a later pass over the
// top deletes it. Each step is one system call on one name relative to a
// descriptor the delete holds (openat O_NOFOLLOW|O_DIRECTORY, unlinkat, renameat);
// ".." is never looked up and no symbolic link is followed, so what is deleted is
// only ever reached down from the tree's own top.

// maxHeldDirs bounds the directory descriptors one delete holds.
const maxHeldDirs = 16

// maxRemovePasses bounds how often one directory is read again because entries
// kept appearing in it while it was emptied (a kernel writing into the tree as
// it is deleted), and maxRemoveMoves how many subtrees one delete moves to its
// top (a session disk of 4 GiB holds about 262,000 inodes, so at most a sixteenth
// of that for the deepest tree it can hold), so that a delete always ends.
const (
	maxRemovePasses = 1000
	maxRemoveMoves  = 1 << 20
)

// errKeepsChanging is a delete that gave up after maxRemovePasses.
var errKeepsChanging = errors.New("entries kept appearing while it was deleted")

// removeFrame is one directory the delete holds open.
type removeFrame struct {
	f       *os.File
	fd      int
	name    string   // its name in the directory of the frame below it
	pending []string // names read and not handled yet
	again   bool     // look at it once more: something may have appeared
	passes  int      // passes that found entries, not counting moved, for maxRemovePasses
	moved   bool     // the delete moved a subtree into it during this pass
}

// removeAllAt removes the directory name in dir with everything below it, as
// described above. With writable set it also deletes from directories that are
// not writable (data copies are 0555) by giving their owner write permission
// first (fchmod on the descriptor it holds); the session files API does not.
func removeAllAt(dir int, name string, writable bool) error {
	fd, err := paths.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return err
	}
	top := &removeFrame{f: os.NewFile(uintptr(fd), name), fd: fd, name: name}
	err = emptyTree(top, writable)
	top.f.Close()
	if err != nil {
		return err
	}
	// Not retryWritable: dir is not part of the tree, its mode stays as it is.
	return unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
}

// emptyTree deletes everything below the directory top.
func emptyTree(top *removeFrame, writable bool) error {
	stack := []*removeFrame{top}
	moves := 0
	defer func() {
		for i := 1; i < len(stack); i++ {
			stack[i].f.Close()
		}
	}()
	for len(stack) > 0 {
		fr := stack[len(stack)-1]
		if len(fr.pending) == 0 {
			more, err := fr.refill()
			if err != nil {
				return err
			}
			if more {
				continue
			}
			// Empty: delete it from the directory below it on the stack.
			stack = stack[:len(stack)-1]
			fr.f.Close()
			if len(stack) == 0 {
				return nil // the caller removes the top
			}
			if err := unlinkEmpty(stack[len(stack)-1], fr.name, writable); err != nil {
				return err
			}
			continue
		}
		n := fr.pending[0]
		fr.pending = fr.pending[1:]
		down, err := removeEntry(fr, n, writable)
		if err != nil || !down {
			if err != nil {
				return err
			}
			continue
		}
		if len(stack) >= maxHeldDirs {
			// Too deep to hold another descriptor: move the subtree to the top.
			if moves++; moves > maxRemoveMoves {
				return fmt.Errorf("%q: %w", top.name, errKeepsChanging)
			}
			if err := moveToTop(fr.fd, n, top.fd); err != nil {
				return err
			}
			top.again, top.moved = true, true
			continue
		}
		fd, err := paths.Openat(fr.fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		switch {
		case err == nil:
			stack = append(stack, &removeFrame{f: os.NewFile(uintptr(fd), n), fd: fd, name: n})
		case errors.Is(err, unix.ENOENT):
		case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
			fr.again = true // replaced by a file or a link meanwhile: unlinked next pass
		default:
			return err
		}
	}
	return nil
}

// refill gives fr names to delete: the next batch of its listing or, once a
// pass deleted what it found, the listing read again, since entries made or
// moved in meanwhile may not have been listed. It reports false when fr is
// empty.
func (fr *removeFrame) refill() (bool, error) {
	names, err := fr.f.Readdirnames(256)
	if len(names) > 0 {
		fr.pending, fr.again = names, true
		return true, nil
	}
	if err != nil && err != io.EOF {
		return false, err
	}
	if !fr.again {
		return false, nil
	}
	if !fr.moved {
		if fr.passes++; fr.passes > maxRemovePasses {
			return false, fmt.Errorf("%q: %w", fr.name, errKeepsChanging)
		}
	}
	fr.again, fr.moved = false, false
	if _, err := fr.f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	return true, nil
}

// unlinkEmpty deletes the directory name of parent, which was found empty.
func unlinkEmpty(parent *removeFrame, name string, writable bool) error {
	err := retryWritable(parent.fd, writable, func() error { return unix.Unlinkat(parent.fd, name, unix.AT_REMOVEDIR) })
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
	case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST), errors.Is(err, unix.ENOTDIR):
		// Filled again, or replaced by a file or a link, meanwhile: the
		// parent's next pass takes it.
		parent.again = true
	default:
		return err
	}
	return nil
}

// removeEntry deletes the entry n of fr unless it is a directory that is not
// empty, and then reports down: its contents must be deleted first. A symbolic
// link is unlinked itself.
func removeEntry(fr *removeFrame, n string, writable bool) (down bool, err error) {
	err = retryWritable(fr.fd, writable, func() error { return unix.Unlinkat(fr.fd, n, 0) })
	if err == nil || errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	// Linux says EISDIR for a directory, POSIX allows EPERM.
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return false, err
	}
	err = retryWritable(fr.fd, writable, func() error { return unix.Unlinkat(fr.fd, n, unix.AT_REMOVEDIR) })
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
		return false, nil
	case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
		return true, nil
	case errors.Is(err, unix.ENOTDIR):
		fr.again = true // replaced by a file meanwhile
		return false, nil
	}
	return false, err
}

// moveToTop renames the directory n of dir to a fresh temporary name in top.
func moveToTop(dir int, n string, top int) error {
	for range 5 {
		err := unix.Renameat(dir, n, top, tempPrefix+randomSuffix())
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.EEXIST), errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.ENOTDIR):
			continue // that name is taken: another one
		}
		return err
	}
	return fmt.Errorf("move %q up: %w", n, unix.EEXIST)
}

// retryWritable runs op, and when writable is set and op failed for want of
// write permission on the directory dir, gives dir's owner rwx and runs it again.
func retryWritable(dir int, writable bool, op func() error) error {
	err := op()
	if writable && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) {
		if unix.Fchmod(dir, 0o700) == nil {
			return op()
		}
	}
	return err
}
