//go:build unix

package paths

import (
	"errors"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// walkNoFollow opens the clean absolute path one component at a time: each
// directory with openat(2) O_DIRECTORY|O_NOFOLLOW relative to the one before (a
// symlink there fails with ENOTDIR or ELOOP), the last with flags|O_NOFOLLOW.
// Nothing is ever looked up again by name from the root, so a component swapped
// after it was opened changes nothing.
func walkNoFollow(path string, flags int) (*os.File, error) {
	dir, err := Openat(unix.AT_FDCWD, "/", DirFlags)
	if err != nil {
		return nil, err
	}
	rest := strings.TrimPrefix(path, "/")
	if rest == "" {
		unix.Close(dir)
		return openFD(unix.AT_FDCWD, "/", path, flags)
	}
	parts := strings.Split(rest, "/")
	for _, name := range parts[:len(parts)-1] {
		fd, err := Openat(dir, name, DirFlags)
		if err != nil {
			err = explainWalk(dir, name, err)
			unix.Close(dir)
			return nil, err
		}
		unix.Close(dir)
		dir = fd
	}
	defer unix.Close(dir)
	f, err := openFD(dir, parts[len(parts)-1], path, flags)
	if errors.Is(err, unix.ELOOP) {
		return nil, errLinkInPath
	}
	return f, err
}

// walkBeneath opens the slash path rel below dir one component at a time, each
// with openat(2) O_NOFOLLOW relative to the one before, the last with flags. A
// symbolic link met on the way fails with errLinkInPath, as openat2 would.
// rel must have no empty, "." or ".." component.
func walkBeneath(dir int, rel string, flags int) (int, error) {
	parts := strings.Split(rel, "/")
	cur := dir
	for _, name := range parts[:len(parts)-1] {
		fd, err := Openat(cur, name, DirFlags)
		if err != nil {
			err = explainWalk(cur, name, err)
		}
		if cur != dir {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur = fd
	}
	fd, err := Openat(cur, parts[len(parts)-1], flags|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		err = explainWalk(cur, parts[len(parts)-1], err)
	}
	if cur != dir {
		unix.Close(cur)
	}
	return fd, err
}

func openFD(dir int, name, path string, flags int) (*os.File, error) {
	fd, err := Openat(dir, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// Openat is openat(2) (mode 0), retried on EINTR.
func Openat(dir int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, flags, 0)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// explainWalk turns the ENOTDIR or ELOOP of a directory component that is a
// symlink into ErrLinkInPath.
func explainWalk(dir int, name string, err error) error {
	if !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
		return err
	}
	var st unix.Stat_t
	if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return errLinkInPath
	}
	return err
}
