package workspace

import (
	"cmp"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/paths"
	"golang.org/x/sys/unix"
)

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

// List lists the directory at path (relative to the session directory; "" is
// the session directory itself): at most max entries (api.DefaultMaxListEntries
// when max <= 0), sorted by name, with Truncated set when there were more.
// Kernelbox's temporary files and names that are not valid UTF-8 (which no
// client could ask for by the name a listing gives) are left out. It fails with
// ErrInvalidPath, ErrNotFound or ErrNotDirectory.
func (s *Session) List(path string, max int) (api.DirListing, error) {
	const op = "list"
	if err := CheckFilePath(path, true); err != nil {
		return api.DirListing{}, err
	}
	if path == "." {
		path = ""
	}
	if max <= 0 {
		max = api.DefaultMaxListEntries
	}
	var parts []string
	if path != "" {
		parts = strings.Split(path, "/")
	}
	l := api.DirListing{Path: path, Entries: []api.FileEntry{}}
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
				l.Entries = append(l.Entries, api.FileEntry{
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
	slices.SortFunc(l.Entries, func(a, b api.FileEntry) int { return cmp.Compare(a.Name, b.Name) })
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
