package workspace

import (
	"errors"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once openat2 turned out to be missing (ENOSYS) or filtered out
// (EPERM from a seccomp profile older than the call), so later opens go straight
// to the walk. It caches a property of the running kernel, the same for everyone.
var noOpenat2 atomic.Bool

func openNoFollow(path string, flags int) (*os.File, error) {
	if noOpenat2.Load() {
		return walkNoFollow(path, flags)
	}
	how := unix.OpenHow{
		Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for {
		fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), path), nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ELOOP):
			return nil, errLinkInPath
		case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM):
			noOpenat2.Store(true)
			return walkNoFollow(path, flags)
		default:
			return nil, err
		}
	}
}

// walkDirFlags opens a directory on the way down as a handle only.
const walkDirFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// openBeneath opens the relative path rel below the directory dir with flags,
// without following a symbolic link at any component and without leaving dir
// (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS: one system call whatever the
// depth), or with walkBeneath where openat2 is missing.
func openBeneath(dir int, rel string, flags int) (int, error) {
	if noOpenat2.Load() {
		return walkBeneath(dir, rel, flags)
	}
	how := unix.OpenHow{
		Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for {
		fd, err := unix.Openat2(dir, rel, &how)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM):
			noOpenat2.Store(true)
			return walkBeneath(dir, rel, flags)
		}
		return fd, err
	}
}
