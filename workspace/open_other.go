//go:build unix && !linux

package workspace

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

// walkDirFlags opens a directory on the way down; there is no O_PATH here.
const walkDirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
