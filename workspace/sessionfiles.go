package workspace

import (
	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/paths"

	"errors"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// The session files API: a client that is not on the server's host hands a
// session files (Put), takes them back (Get), lists (List) and deletes (Remove)
// them. Paths are relative to the session directory, which the kernel controls,
// so every operation walks the path one element at a time from the session's own
// directory handle with openat(2) and O_NOFOLLOW: no element is ever looked up
// again by name from a directory that could have been swapped meanwhile, no
// symbolic link is followed anywhere on the path, and nothing but a regular file
// is opened (it is fstatat-ed first and fstat-ed after the O_NONBLOCK open, so a
// FIFO neither blocks nor is read and a device is never opened).

// File errors. Each also matches the api sentinel of the same meaning, so the
// HTTP API and the client classify them from one table.
var (
	// ErrIsDirectory means a path names a directory where a file was expected.
	ErrIsDirectory = api.ErrIsDirectory

	// ErrNotDirectory means an element of a path (or the directory to list) is
	// not a directory.
	ErrNotDirectory = api.ErrNotDirectory

	// ErrQuota means the session's disk is full (Options.DiskQuota): a Put that
	// hit it was undone.
	ErrQuota = api.ErrQuota

	// ErrFileExists means a Put with NoOverwrite found something at its path.
	ErrFileExists = api.ErrExists
)

// Limits of session file paths.
const (
	// MaxPathBytes is PATH_MAX: the longest path the files API accepts.
	MaxPathBytes = paths.MaxPathBytes
)

// fileError is what the file operations return: the path, why, and the
// sentinels it matches (one of this package's and, when it has one, api's).
type fileError struct {
	op, path, why string
	errs          []error
}

func (e *fileError) Error() string {
	return fmt.Sprintf("%s %q: %s", e.op, e.path, e.why)
}

func (e *fileError) Is(target error) bool { return slices.Contains(e.errs, target) }

func (e *fileError) Unwrap() []error { return e.errs }

func invalidPath(op, p, why string) error {
	return &fileError{op: op, path: p, why: "invalid path: " + why, errs: []error{ErrInvalidPath, api.ErrInvalidPath}}
}

// CheckFilePath returns an error matching ErrInvalidPath (and api.ErrInvalidPath)
// unless p is a path the files API accepts (paths.CheckPath's strictest rule):
// relative, slash-separated, at most MaxPathBytes, valid UTF-8 without NUL, no
// empty, "." or ".." element, no element over 255 bytes and none starting with
// kernelbox's temporary prefix ".kb-tmp-". The empty path is accepted only when
// allowRoot is set (List of the session directory itself).
func CheckFilePath(p string, allowRoot bool) error {
	var e *paths.Error
	if err := paths.CheckPath(p, paths.PathRule{AllowRoot: allowRoot}); errors.As(err, &e) {
		return invalidPath("check", e.Shown(), e.Problem.String())
	}
	return nil
}

// withDir walks dirs (path elements below the session directory) with openat
// O_DIRECTORY|O_NOFOLLOW, each relative to the one before, making missing ones
// when create is set, and calls fn with the last directory's descriptor.
func withDir(s *Session, op, path string, dirs []string, create bool, fn func(dir int) (int64, error)) (int64, error) {
	if s.root == nil {
		return 0, &fileError{op: op, path: path, why: "session closed", errs: []error{ErrClosed}}
	}
	top, err := s.root.Open(".")
	if err != nil {
		return 0, errnoError(op, path, err)
	}
	defer top.Close()
	// Fd is safe here: a directory is never in the poller, so it stays as it is.
	dir, err := unix.FcntlInt(top.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return 0, errnoError(op, path, err)
	}
	for _, name := range dirs {
		next, err := paths.Openat(dir, name, paths.DirFlags)
		if errors.Is(err, unix.ENOENT) && create {
			next, err = s.makeDir(dir, name)
		}
		if err != nil {
			err = explainDirErr(dir, op, path, name, err)
			unix.Close(dir)
			return 0, err
		}
		unix.Close(dir)
		dir = next
	}
	defer unix.Close(dir)
	return fn(dir)
}

// makeDir makes the directory name in dir (DirMode, set with fchmod so umask
// does not narrow it) and opens it; a directory made meanwhile by someone else
// is used as it is.
func (s *Session) makeDir(dir int, name string) (int, error) {
	if err := unix.Mkdirat(dir, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, err
	}
	fd, err := paths.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return -1, err
	}
	if err := unix.Fchmod(fd, uint32(s.m.opts.DirMode)); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := inheritOwner(dir, fd); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// inheritOwner gives fd (a file or directory just made in dir) dir's owner and
// group, when this process may (it runs as root) and they differ: a backend
// that runs the kernel as another uid (docker) chowns the session directory
// to it, and the kernel must be able to change what a client uploaded there.
func inheritOwner(dir, fd int) error {
	if os.Geteuid() != 0 {
		return nil
	}
	var d, f unix.Stat_t
	if err := unix.Fstat(dir, &d); err != nil {
		return err
	}
	if err := unix.Fstat(fd, &f); err != nil {
		return err
	}
	if d.Uid == f.Uid && d.Gid == f.Gid {
		return nil
	}
	return unix.Fchown(fd, int(d.Uid), int(d.Gid))
}

// explainDirErr says why the directory element name (in dir) of path could not
// be opened.
func explainDirErr(dir int, op, path, name string, err error) error {
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		var st unix.Stat_t
		if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return invalidPath(op, path, fmt.Sprintf("%q is a symbolic link; links are not followed", name))
			}
			return &fileError{op: op, path: path, why: fmt.Sprintf("%q is a %s, not a directory", name, kindOf(fileMode(st.Mode))), errs: []error{ErrNotDirectory}}
		}
	}
	return errnoError(op, path, err)
}

// errnoError maps a system call's error to the file errors; nil stays nil.
func errnoError(op, path string, err error) error {
	if err == nil {
		return nil
	}
	var fe *fileError
	if errors.As(err, &fe) {
		return err
	}
	e := bare(err)
	switch {
	case errors.Is(e, unix.ENOENT):
		return &fileError{op: op, path: path, why: "no such file", errs: []error{ErrNotFound, api.ErrNotFound}}
	case errors.Is(e, unix.ELOOP):
		return invalidPath(op, path, "is a symbolic link; links are not followed")
	case errors.Is(e, unix.EISDIR):
		return &fileError{op: op, path: path, why: "is a directory", errs: []error{ErrIsDirectory}}
	case errors.Is(e, unix.ENOTDIR):
		return &fileError{op: op, path: path, why: "an element of the path is not a directory", errs: []error{ErrNotDirectory}}
	case errors.Is(e, unix.EEXIST), errors.Is(e, unix.ENOTEMPTY):
		return &fileError{op: op, path: path, why: "exists already", errs: []error{ErrFileExists}}
	case errors.Is(e, unix.ENOSPC), errors.Is(e, unix.EDQUOT):
		return &fileError{op: op, path: path, why: "the session's disk is full (its disk quota); nothing was left", errs: []error{ErrQuota}}
	case errors.Is(e, unix.ENAMETOOLONG):
		return invalidPath(op, path, "name too long")
	}
	return fmt.Errorf("%s %q: %w", op, path, err)
}
