package permissions

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// Canonical returns the absolute path, with every symlink resolved, that path names.
// A relative path is taken relative to workdir, which must then be absolute. The
// result is what rules are matched against and what a caller must open: a link
// inside an allowed directory that points at /etc/shadow is /etc/shadow here, as is a
// link to such a link.
//
// ".." is applied the way the operating system applies it, after the symlink before
// it has been followed (a/link/../x is the parent of link's target, joined with x),
// not by lexical cleaning, which would give a different file than the one opened.
//
// The path must exist. Canonical fails for an empty path, a NUL byte, a relative path
// without an absolute workdir, a missing file, a dangling link, a symlink loop and a
// directory that cannot be searched; the error reads "cannot resolve path: …".
//
// The answer holds when Canonical returns: a caller that opens the file later should
// open the returned path and refuse symlinks (O_NOFOLLOW) in case it was replaced.
func Canonical(path, workdir string) (string, error) {
	switch {
	case path == "":
		return "", errors.New("cannot resolve path: empty path")
	case strings.IndexByte(path, 0) >= 0:
		return "", errors.New("cannot resolve path: path contains a NUL byte")
	}
	if !filepath.IsAbs(path) {
		switch {
		case workdir == "":
			return "", errors.New("cannot resolve path: relative path and no workdir to resolve it against")
		case !filepath.IsAbs(workdir):
			return "", fmt.Errorf("cannot resolve path: workdir %q is not an absolute path", workdir)
		}
		// Not filepath.Join: it cleans lexically, so "link/.." would vanish before
		// the link is followed.
		path = workdir + string(filepath.Separator) + path
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		// The operation and path in a PathError may be those of a link's target;
		// the cause alone ("no such file or directory") is what the reader needs.
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("cannot resolve path: %w", err)
	}
	if !filepath.IsAbs(resolved) {
		return "", fmt.Errorf("cannot resolve path: resolved to relative path %q", resolved)
	}
	return filepath.Clean(resolved), nil
}

// resolveExisting resolves the symlinks in the longest existing leading part of the
// absolute path p and joins the rest on unchanged. Deny and ask patterns use it so
// that a secret reached through a symlinked directory is still covered.
func resolveExisting(p string) string {
	return pathResolver{}.resolve(filepath.Clean(p))
}
