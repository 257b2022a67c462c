package workspace

import (
	"fmt"
	"path/filepath"
	"strings"
)

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
