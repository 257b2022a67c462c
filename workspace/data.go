package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"github.com/kernelbox/kernelbox/internal/paths"
)

// Modes of data copies: read-only for everyone, as a reminder to the code that
// data is input. (A kernel running as the directory's owner could chmod them; the
// docker backend bind-mounts data read-only instead of copying.)
const (
	dataFileMode = fs.FileMode(0o444)
	dataDirMode  = fs.FileMode(0o555)
)

// AddData copies the host directory hostDir to data/<name> in the session, for
// backends that cannot bind-mount it (the local backend). Files become 0444 and
// directories 0555. Only regular files and directories are copied: symlinks are
// skipped (and logged), never followed, so the copy is free of links; FIFOs,
// devices and sockets are skipped without being opened.
//
// The copy is built in a temporary directory inside data/ and renamed into place,
// replacing an earlier data/<name>, only once complete. If the files together
// hold more than maxBytes (checked while copying), AddData fails with ErrTooLarge
// and leaves no partial copy; maxBytes <= 0 means Options.MaxSessionBytes. name
// must be a plain file name (ErrInvalidName). hostDir is trusted configuration; a
// symlink there is refused.
func (s *Session) AddData(name, hostDir string, maxBytes int64) error {
	if s.root == nil {
		return fmt.Errorf("add data: %w", ErrClosed)
	}
	if err := paths.CheckName(name, paths.Plain); err != nil {
		return fmt.Errorf("add data: %w", err)
	}
	if maxBytes <= 0 {
		maxBytes = s.m.opts.MaxSessionBytes
	}
	wrap := func(err error) error { return fmt.Errorf("add data %q from %q: %w", name, hostDir, err) }

	src, err := openDataDir(hostDir)
	if err != nil {
		return wrap(err)
	}
	defer src.Close()

	data, err := ensureDir(s.root, "data", s.m.opts.DirMode)
	if err != nil {
		return wrap(fmt.Errorf("data/: %w", err))
	}
	defer data.Close()
	tmp := tempPrefix + randomSuffix()
	if err := data.Mkdir(tmp, 0o700); err != nil {
		return wrap(err)
	}
	dst, err := openDir(data, tmp)
	if err == nil {
		dc := &dataCopy{s: s, name: name, limit: maxBytes}
		err = dc.copyDir(src, dst, "")
		dst.Close()
		if err == nil {
			err = chmodDir(data, tmp, dataDirMode)
		}
	}
	if err == nil {
		err = replaceDir(data, tmp, name)
	}
	if err != nil {
		if rerr := removeTree(data, tmp); rerr != nil {
			s.log.Warn("could not remove partial data copy", "name", name, "err", rerr)
		}
		return wrap(err)
	}
	s.log.Debug("added data", "name", name, "host_dir", hostDir)
	return nil
}

// openDataDir returns a Root on the directory at exactly hostDir. os.OpenRoot
// follows links at every component, so the directory is also opened with
// paths.OpenNoFollow, which follows none, and the two must be the same: a
// directory on the path swapped with a link meanwhile makes them differ.
func openDataDir(hostDir string) (*os.Root, error) {
	abs, err := filepath.Abs(hostDir)
	if err != nil {
		return nil, err
	}
	lfi, err := os.Lstat(abs)
	if err != nil {
		return nil, bare(err)
	}
	if !lfi.IsDir() {
		return nil, fmt.Errorf("is a %s, not a directory", kindOf(lfi.Mode()))
	}
	exact, err := paths.OpenNoFollow(abs)
	if err != nil {
		return nil, bare(err)
	}
	defer exact.Close()
	efi, err := exact.Stat()
	if err != nil {
		return nil, err
	}
	src, err := os.OpenRoot(abs)
	if err != nil {
		return nil, bare(err)
	}
	if fi, err := src.Stat("."); err != nil || !os.SameFile(fi, efi) || !os.SameFile(fi, lfi) {
		src.Close()
		return nil, errors.New("directory was replaced while it was being opened")
	}
	return src, nil
}

// replaceDir renames the finished copy tmp to name, moving an existing name aside
// first (rename(2) will not replace a non-empty directory) and removing it after.
func replaceDir(data *os.Root, tmp, name string) error {
	if _, err := data.Lstat(name); errors.Is(err, fs.ErrNotExist) {
		return data.Rename(tmp, name)
	}
	old := tempPrefix + randomSuffix()
	if err := data.Rename(name, old); err != nil {
		return err
	}
	if err := data.Rename(tmp, name); err != nil {
		return errors.Join(err, data.Rename(old, name))
	}
	return removeTree(data, old)
}

// dataCopy is the state of one AddData copy.
type dataCopy struct {
	s     *Session
	name  string
	limit int64
	used  int64
}

// copyDir copies the contents of src into the empty directory dst; rel is their
// slash path below the data directory, for logs.
func (dc *dataCopy) copyDir(src, dst *os.Root, rel string) error {
	d, err := src.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	for {
		entries, rerr := d.ReadDir(256)
		for _, e := range entries {
			if err := dc.copyEntry(src, dst, e, path.Join(rel, e.Name())); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

func (dc *dataCopy) copyEntry(src, dst *os.Root, e fs.DirEntry, rel string) error {
	name := e.Name()
	switch t := e.Type(); {
	case t.IsDir():
		sub, err := openDir(src, name)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		defer sub.Close()
		if err := dst.Mkdir(name, 0o700); err != nil {
			return err
		}
		dsub, err := openDir(dst, name)
		if err != nil {
			return err
		}
		err = dc.copyDir(sub, dsub, rel)
		dsub.Close()
		if err != nil {
			return err
		}
		return chmodDir(dst, name, dataDirMode)
	case t.IsRegular():
		return dc.copyRegular(src, dst, name, rel)
	default:
		dc.s.log.Info("skipped data entry that is not a regular file or directory", "name", rel, "type", kindOf(t))
		return nil
	}
}

func (dc *dataCopy) copyRegular(src, dst *os.Root, name, rel string) error {
	lfi, err := src.Lstat(name)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, bare(err))
	}
	if !lfi.Mode().IsRegular() {
		dc.s.log.Info("skipped data entry that is not a regular file or directory", "name", rel, "type", kindOf(lfi.Mode()))
		return nil
	}
	in, err := src.OpenFile(name, openReadFlags, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, bare(err))
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	if !fi.Mode().IsRegular() || !os.SameFile(lfi, fi) {
		dc.s.log.Info("skipped data file that changed while being opened", "name", rel)
		return nil
	}
	out, err := dst.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, dataFileMode)
	if err != nil {
		return err
	}
	c, err := copyFile(out, in, dc.limit-dc.used, fi.Size(), false)
	if err == nil {
		err = out.Chmod(dataFileMode)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, errOverLimit) {
		return fmt.Errorf("more than %d bytes of files (at %s): %w", dc.limit, rel, ErrTooLarge)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	dc.used += c.n
	return nil
}
