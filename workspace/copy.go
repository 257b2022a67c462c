package workspace

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// CopyOptions bound and filter CopyTree.
type CopyOptions struct {
	// Limit caps the bytes copied, counted by apparent size so that a sparse
	// file (a terabyte that takes no space) counts in full and cannot fill the
	// host's disk: past it CopyTree fails with ErrTooLarge. Defaults to 8 GiB.
	Limit int64
	// Skip, when not nil, leaves out the entry at rel (slash-separated, relative
	// to the source), and everything under it when it is a directory.
	Skip func(rel string, d fs.DirEntry) bool
}

// CopyTree copies the session directory src into dst (a fork: issue 34), both
// open Sessions of this Manager. src is untrusted (a kernel wrote it): it is
// walked under an os.Root, so no symbolic link is followed at any component;
// only regular files and directories are copied (links, devices, FIFOs and
// sockets are left out), and a file swapped for a FIFO or device after the walk
// saw it is left out too (opened without blocking and checked after the open),
// never waited on. Owners are kept when this process may set them (as root), so
// that a docker kernel can write the copies of its files. A full disk (dst's
// quota) is returned as an error.
func (m *Manager) CopyTree(src, dst *Session, o CopyOptions) error {
	if o.Limit <= 0 {
		o.Limit = 8 << 30
	}
	root, err := os.OpenRoot(src.Dir())
	if err != nil {
		return fmt.Errorf("copy session %s: %w", src.ID(), err)
	}
	defer root.Close()
	left := o.Limit
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if o.Skip != nil && o.Skip(p, d) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst.Dir(), filepath.FromSlash(p))
		switch {
		case d.IsDir():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			return sameOwner(target, fi)
		case d.Type().IsRegular():
			return copyFileFrom(root, p, target, &left, o.Limit)
		}
		return nil
	})
}

// sameOwner gives target the owner of the file fi describes, when this process may
// (as root).
func sameOwner(target string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || os.Geteuid() != 0 {
		return nil
	}
	return os.Lchown(target, int(st.Uid), int(st.Gid))
}

// copyFileFrom copies the regular file name under root to target and takes its
// size from *left. One that grows while it is copied is copied only up to the
// size it had.
func copyFileFrom(root *os.Root, name, target string, left *int64, limit int64) error {
	in, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	if fi.Size() > *left {
		return fmt.Errorf("%w: the session's files are over %d bytes (apparent sizes: a sparse file counts in full)", ErrTooLarge, limit)
	}
	*left -= fi.Size()
	out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.LimitReader(in, fi.Size())); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return sameOwner(target, fi)
}
