package paths

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Host sources (staged inputs, data directories) are opened by path, and the
// permission engine decided on that exact path: a canonical one, with every
// symlink already resolved. Opening it again with open(2) would resolve every
// component afresh, so whoever can write a directory on the path could swap it
// with a symlink between the decision and the open (renameat2 RENAME_EXCHANGE wins
// that race about once in two tries) and have a different file copied. O_NOFOLLOW
// protects only the last component. OpenNoFollow therefore refuses a symlink at any
// component: whatever is opened is the file at the decided path itself.

// ErrLinkInPath means a path that must be opened without following links
// (OpenNoFollow) leads through a symbolic link: something on it changed since
// it was resolved.
var ErrLinkInPath = errors.New("path leads through a symbolic link")

// errLinkInPath is what the opens return for a link met on the way.
var errLinkInPath = fmt.Errorf("%w (it changed since it was resolved)", ErrLinkInPath)

// ReadFlags opens a file for reading without following a final symlink (where
// the OS is asked directly) and without blocking on a FIFO or a device.
const ReadFlags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC

// OpenNoFollow opens the file at the absolute path path for reading, without
// following a symbolic link (or a /proc magic link) at any component, and without
// blocking on a FIFO or device. A link anywhere on the path fails with an error
// wrapping ErrLinkInPath. On Linux it is one openat2(2) with
// RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS; where openat2 is missing (before Linux
// 5.6, or refused by a seccomp filter) and on other systems it walks the path one
// component at a time with openat(2) and O_NOFOLLOW.
//
// The path is cleaned lexically first, which is right for a path with no links in
// it. OpenNoFollow is safe for concurrent use.
func OpenNoFollow(path string) (*os.File, error) {
	if !filepath.IsAbs(path) {
		return nil, &fs.PathError{Op: "open", Path: path, Err: errors.New("not an absolute path")}
	}
	path = filepath.Clean(path)
	f, err := openNoFollow(path, ReadFlags)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return f, nil
}

// OpenBeneath opens rel, a slash path below the directory handle dir ("." for
// dir itself), with flags, without following a symbolic link at any component
// and without leaving dir, and returns the new descriptor. On Linux it is one
// openat2(2) with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS,
// whatever the depth; where openat2 is missing and on other systems it opens one
// component at a time with openat(2) and O_NOFOLLOW, each relative to the one
// before. rel must pass CheckPath with AllowTemp (or be "."); anything else fails
// with an *Error before a system call. OpenBeneath is safe for concurrent use.
func OpenBeneath(dir int, rel string, flags int) (int, error) {
	if rel != "." {
		if err := CheckPath(rel, PathRule{AllowTemp: true}); err != nil {
			return -1, err
		}
	}
	return openBeneath(dir, rel, flags)
}
