//go:build unix && !linux

package paths

import (
	"os"

	"golang.org/x/sys/unix"
)

func openNoFollow(path string, flags int) (*os.File, error) {
	return walkNoFollow(path, flags)
}

func openBeneath(dir int, rel string, flags int) (int, error) {
	return walkBeneath(dir, rel, flags)
}

// DirFlags open a directory on the way down a path; there is no O_PATH here.
const DirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// UseWalk does nothing here: every open walks.
func UseWalk() (restore func()) { return func() {} }
