package paths

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

// DirFlags open a directory on the way down a path as a handle only (O_PATH):
// enough to open what is below it, nothing else.
const DirFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// UseWalk makes every later open take the per-component walk, as on a kernel
// without openat2, and returns a function that restores the setting. It is for
// tests of the fallback (the setting is the process's).
func UseWalk() (restore func()) {
	was := noOpenat2.Swap(true)
	return func() { noOpenat2.Store(was) }
}

// openBeneath is OpenBeneath after its check: one openat2, or walkBeneath where
// openat2 is missing.
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
		case errors.Is(err, unix.ELOOP):
			return -1, errLinkInPath
		case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM):
			noOpenat2.Store(true)
			return walkBeneath(dir, rel, flags)
		}
		return fd, err
	}
}
