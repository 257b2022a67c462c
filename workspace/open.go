package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Host sources (staged inputs, data directories) are opened by path, and the
// permission engine decided on that exact path: a canonical one, with every
// symlink already resolved. Opening it again with open(2) would resolve every
// component afresh, so whoever can write a directory on the path could swap it
// with a symlink between the decision and the open (renameat2 RENAME_EXCHANGE wins
// that race about once in two tries) and have a different file copied. O_NOFOLLOW
// protects only the last component. OpenNoFollow therefore refuses a symlink at any
// component: whatever is opened is the file at the decided path itself.

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
	f, err := openNoFollow(path, openReadFlags)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return f, nil
}

// errLinkInPath is what the opens return for a link met on the way.
var errLinkInPath = fmt.Errorf("%w (it changed since it was resolved)", ErrLinkInPath)

// privateDirs are the directories no input may be staged from: the workspace's
// sessions/ (every session's directory, warm ones and trash included), the artifacts directory (every session's
// artifacts) and Options.PrivateDirs, each cleaned and, where it exists, with its
// symlinks resolved, since sources are canonical paths.
func privateDirs(dirs ...string) []string {
	out := make([]string, 0, 2*len(dirs))
	for _, d := range dirs {
		if d == "" {
			continue
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			continue
		}
		out = append(out, abs)
		if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
			out = append(out, real)
		}
	}
	return out
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	if dir == "/" {
		return true
	}
	rest, ok := strings.CutPrefix(path, dir)
	return ok && (rest == "" || rest[0] == '/')
}

// checkPrivate fails with ErrPrivate if the source path lies in one of kernelbox's
// own directories.
func (m *Manager) checkPrivate(path string) error {
	path = filepath.Clean(path)
	m.privMu.RLock()
	defer m.privMu.RUnlock()
	for _, d := range m.private {
		if within(path, d) {
			return fmt.Errorf("%w: it is inside kernelbox's own state", ErrPrivate)
		}
	}
	return nil
}

// Protect adds directories to Options.PrivateDirs after New, for state that is
// created later, such as a backend's socket directories. It is safe for concurrent
// use.
func (m *Manager) Protect(dirs ...string) {
	p := privateDirs(dirs...)
	m.privMu.Lock()
	defer m.privMu.Unlock()
	m.private = append(m.private, p...)
}
