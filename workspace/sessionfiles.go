package workspace

import (
	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/paths"

	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

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

	// DefaultMaxListEntries is how many entries List returns by default.
	DefaultMaxListEntries = 10_000
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

// PutOptions configures Session.Put. The zero value overwrites and uses the
// Manager's MaxFileBytes.
type PutOptions struct {
	// NoOverwrite refuses (ErrFileExists) when something is at the path already.
	NoOverwrite bool

	// MaxBytes limits the file. Defaults to Options.MaxFileBytes.
	MaxBytes int64
}

// MaxFileBytes returns Options.MaxFileBytes, the default limit of Put (and of
// staged inputs), for files APIs that are not on the host (a remote kernel's).
func (m *Manager) MaxFileBytes() int64 { return m.opts.MaxFileBytes }

// Put writes what r yields to path (relative to the session directory) and
// returns the number of bytes written. Missing parent directories are made
// (DirMode); the file (FileMode) is written to a temporary name beside path and
// renamed into place only once complete, so a reader never sees half a file and
// a symbolic link the kernel planted at path is replaced, never written through.
// There is no fsync: a crash may lose the file, never leave half of it under its
// name.
//
// Put fails with ErrInvalidPath (a bad path, a symbolic link on it), ErrNotDirectory
// (a parent is a file), ErrIsDirectory (path is a directory), ErrFileExists
// (NoOverwrite), ErrTooLarge (more than MaxBytes: the upload is cut there) or
// ErrQuota (ENOSPC or EDQUOT from the session's disk); then nothing is left behind.
// An error from r (a client that went away) is returned as it is. ctx is checked
// between writes.
func (s *Session) Put(ctx context.Context, path string, r io.Reader, o PutOptions) (int64, error) {
	const op = "put"
	if err := CheckFilePath(path, false); err != nil {
		return 0, err
	}
	limit := o.MaxBytes
	if limit <= 0 {
		limit = s.m.opts.MaxFileBytes
	}
	parts := strings.Split(path, "/")
	base := parts[len(parts)-1]
	return withDir(s, op, path, parts[:len(parts)-1], true, func(dir int) (int64, error) {
		if err := checkTarget(dir, op, path, base); err != nil {
			return 0, err
		}
		tmp := tempPrefix + randomSuffix()
		fd, err := paths.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err != nil {
			return 0, errnoError(op, path, err)
		}
		f := os.NewFile(uintptr(fd), path)
		undo := func(err error) (int64, error) {
			f.Close()
			_ = unix.Unlinkat(dir, tmp, 0)
			return 0, err
		}
		if err := f.Chmod(s.m.opts.FileMode); err != nil {
			return undo(errnoError(op, path, err))
		}
		if err := inheritOwner(dir, fd); err != nil {
			return undo(errnoError(op, path, err))
		}
		n, err := copyLimited(ctx, f, r, limit)
		if err != nil {
			if errors.Is(err, errOverLimit) {
				err = &fileError{op: op, path: path, why: fmt.Sprintf("over the %d-byte file limit", limit), errs: []error{ErrTooLarge, api.ErrTooLarge}}
			} else {
				err = errnoError(op, path, err)
			}
			return undo(err)
		}
		if err := f.Close(); err != nil {
			_ = unix.Unlinkat(dir, tmp, 0)
			return 0, errnoError(op, path, err)
		}
		if err := placeFile(dir, tmp, base, o.NoOverwrite); err != nil {
			_ = unix.Unlinkat(dir, tmp, 0)
			return 0, errnoError(op, path, err)
		}
		return n, nil
	})
}

// checkTarget refuses early what the rename would refuse late: a directory at
// path (the upload would be read for nothing).
func checkTarget(dir int, op, path, base string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return &fileError{op: op, path: path, why: "is a directory", errs: []error{ErrIsDirectory}}
	}
	return nil
}

// placeFile moves the finished temporary file tmp to base in dir: a rename, which
// replaces whatever non-directory is there (a link itself, not its target), or
// with noOverwrite a hard link, which fails if anything is there, then an unlink
// of tmp.
func placeFile(dir int, tmp, base string, noOverwrite bool) error {
	if !noOverwrite {
		return unix.Renameat(dir, tmp, dir, base)
	}
	if err := unix.Linkat(dir, tmp, dir, base, 0); err != nil {
		return err
	}
	return unix.Unlinkat(dir, tmp, 0)
}

// copyLimited copies r to f, failing with errOverLimit past limit bytes and with
// ctx's error when it ends. Its buffer is fixed (256 KiB), so an upload of any
// size costs the same memory.
func copyLimited(ctx context.Context, f *os.File, r io.Reader, limit int64) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		k, rerr := r.Read(buf)
		if k > 0 {
			if n+int64(k) > limit {
				return n, errOverLimit
			}
			if _, err := f.Write(buf[:k]); err != nil {
				return n, err
			}
			n += int64(k)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// Get opens the regular file at path (relative to the session directory) for
// reading. It fails with ErrInvalidPath (a bad path, a symbolic link anywhere on
// it, a FIFO, socket or device), ErrNotFound, ErrIsDirectory or ErrNotDirectory.
// The caller closes the file.
func (s *Session) Get(path string) (*os.File, error) {
	const op = "get"
	if err := CheckFilePath(path, false); err != nil {
		return nil, err
	}
	parts := strings.Split(path, "/")
	base := parts[len(parts)-1]
	var f *os.File
	_, err := withDir(s, op, path, parts[:len(parts)-1], false, func(dir int) (int64, error) {
		var st unix.Stat_t
		if err := unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return 0, errnoError(op, path, err)
		}
		if err := regularOnly(op, path, st.Mode); err != nil {
			return 0, err
		}
		fd, err := paths.Openat(dir, base, openReadFlags)
		if err != nil {
			return 0, errnoError(op, path, err)
		}
		var now unix.Stat_t
		if err := unix.Fstat(fd, &now); err != nil {
			unix.Close(fd)
			return 0, errnoError(op, path, err)
		}
		if err := regularOnly(op, path, now.Mode); err != nil {
			unix.Close(fd)
			return 0, err
		}
		if now.Dev != st.Dev || now.Ino != st.Ino {
			unix.Close(fd)
			return 0, &fileError{op: op, path: path, why: "changed while it was being opened", errs: []error{ErrNotFound, api.ErrNotFound}}
		}
		f = os.NewFile(uintptr(fd), path)
		return 0, nil
	})
	return f, err
}

// regularOnly fails unless mode (a stat mode) is a regular file.
func regularOnly(op, path string, mode uint32) error {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFDIR:
		return &fileError{op: op, path: path, why: "is a directory", errs: []error{ErrIsDirectory}}
	default:
		return invalidPath(op, path, "is a "+kindOf(fileMode(mode))+", not a regular file")
	}
}

// fileMode converts a stat mode's type bits to an fs.FileMode.
func fileMode(mode uint32) fs.FileMode {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	case unix.S_IFREG:
		return 0
	}
	return fs.ModeIrregular
}

// Remove deletes the file at path (relative to the session directory); a
// symbolic link there is removed itself, never what it points to. A directory
// is removed with everything in it only when recursive is set, otherwise it is
// ErrIsDirectory. Removing a missing path is ErrNotFound.
func (s *Session) Remove(path string, recursive bool) error {
	const op = "remove"
	if err := CheckFilePath(path, false); err != nil {
		return err
	}
	parts := strings.Split(path, "/")
	base := parts[len(parts)-1]
	_, err := withDir(s, op, path, parts[:len(parts)-1], false, func(dir int) (int64, error) {
		var st unix.Stat_t
		if err := unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return 0, errnoError(op, path, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return 0, errnoError(op, path, unix.Unlinkat(dir, base, 0))
		}
		if !recursive {
			return 0, &fileError{op: op, path: path, why: "is a directory (remove it recursively)", errs: []error{ErrIsDirectory}}
		}
		return 0, errnoError(op, path, removeAllAt(dir, base, false))
	})
	return err
}

// Entry is one entry of a session directory listing.
type Entry struct {
	// Name is the entry's name in its directory.
	Name string `json:"name"`
	// Type is "file", "dir", "symlink" or "other" (a FIFO, socket or device).
	Type string `json:"type"`
	// Size is the size in bytes (a symbolic link's is its target's length).
	Size int64 `json:"size"`
	// ModTime is the last modification time.
	ModTime time.Time `json:"mtime"`
}

// Listing is what List returns.
type Listing struct {
	// Path is the directory listed, relative to the session directory ("" for it).
	Path string `json:"path"`
	// Entries are sorted by name.
	Entries []Entry `json:"entries"`
	// Truncated says the directory holds more entries than were listed.
	Truncated bool `json:"truncated"`
}

// List lists the directory at path (relative to the session directory; "" is
// the session directory itself): at most max entries (DefaultMaxListEntries
// when max <= 0), sorted by name, with Truncated set when there were more.
// Kernelbox's temporary files and names that are not valid UTF-8 (which no
// client could ask for by the name a listing gives) are left out. It fails with
// ErrInvalidPath, ErrNotFound or ErrNotDirectory.
func (s *Session) List(path string, max int) (Listing, error) {
	const op = "list"
	if err := CheckFilePath(path, true); err != nil {
		return Listing{}, err
	}
	if path == "." {
		path = ""
	}
	if max <= 0 {
		max = DefaultMaxListEntries
	}
	var parts []string
	if path != "" {
		parts = strings.Split(path, "/")
	}
	l := Listing{Path: path, Entries: []Entry{}}
	_, err := withDir(s, op, path, parts, false, func(dir int) (int64, error) {
		fd, err := unix.FcntlInt(uintptr(dir), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return 0, errnoError(op, path, err)
		}
		// The walk opened dir as a handle only (O_PATH); reading needs a real open.
		rfd, err := paths.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
		unix.Close(fd)
		if err != nil {
			return 0, errnoError(op, path, err)
		}
		d := os.NewFile(uintptr(rfd), path)
		defer d.Close()
		for {
			names, rerr := d.Readdirnames(256)
			for _, n := range names {
				if paths.CheckName(n, paths.Listed) != nil {
					continue // a temporary file, or a name no client could ask for
				}
				if len(l.Entries) == max {
					l.Truncated = true
					return 0, nil
				}
				var st unix.Stat_t
				if unix.Fstatat(rfd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
					continue // gone meanwhile
				}
				l.Entries = append(l.Entries, Entry{
					Name:    n,
					Type:    entryType(st.Mode),
					Size:    st.Size,
					ModTime: time.Unix(st.Mtim.Unix()).UTC(),
				})
			}
			if rerr == io.EOF {
				return 0, nil
			}
			if rerr != nil {
				return 0, errnoError(op, path, rerr)
			}
		}
	})
	slices.SortFunc(l.Entries, func(a, b Entry) int { return cmp.Compare(a.Name, b.Name) })
	return l, err
}

func entryType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "other"
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
