// Package statefile reads and writes kernelbox's small private state files (the
// kept sessions, the docker backend's containers, the calls journal): written
// whole through a temporary file renamed over the old one, mode 0600, so that a
// reader never sees half a file; read only when they are regular files (no link
// followed) of a bounded size. Start reading at [Write].
package statefile

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Read reads path, a regular file of at most limit bytes; a link (not followed),
// anything else or a bigger file is an error.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > limit {
		return nil, fmt.Errorf("%s is not a regular file of at most %d bytes", path, limit)
	}
	b := make([]byte, fi.Size())
	_, err = f.ReadAt(b, 0)
	return b, err
}

// Write writes data to path through a temporary file in its directory, mode 0600,
// renamed over path. With sync the data reaches the disk before the rename (the
// file must survive the machine's end, not only the process's).
func Write(path string, data []byte, sync bool) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(0o600); err == nil {
		if _, err = f.Write(data); err == nil && sync {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
