package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/paths"
	"golang.org/x/sys/unix"
)

// MaxFileBytes returns Options.MaxFileBytes, the default limit of Put (and of
// staged inputs), for files APIs that are not on the host (a remote kernel's).
func (m *Manager) MaxFileBytes() int64 { return m.opts.MaxFileBytes }

// Put writes what r yields to path (relative to the session directory) and
// returns the number of bytes written. Missing parent directories are made
// (DirMode); the file (FileMode) is written to a temporary name beside path and
// renamed into place only once complete, so a reader never sees half a file and
// a symbolic link the kernel planted at path is replaced, never written through.
// There is no fsync: a crash may lose the file, never leave half of it under its
// name.
//
// Put fails with ErrInvalidPath (a bad path, a symbolic link on it), ErrNotDirectory
// (a parent is a file), ErrIsDirectory (path is a directory), ErrFileExists
// (NoOverwrite), ErrTooLarge (more than MaxBytes: the upload is cut there) or
// ErrQuota (ENOSPC or EDQUOT from the session's disk); then nothing is left behind.
// An error from r (a client that went away) is returned as it is. ctx is checked
// between writes.
func (s *Session) Put(ctx context.Context, path string, r io.Reader, o api.PutOptions) (int64, error) {
	const op = "put"
	if err := CheckFilePath(path, false); err != nil {
		return 0, err
	}
	limit := o.MaxBytes
	if limit <= 0 {
		limit = s.m.opts.MaxFileBytes
	}
	parts := strings.Split(path, "/")
	base := parts[len(parts)-1]
	return withDir(s, op, path, parts[:len(parts)-1], true, func(dir int) (int64, error) {
		if err := checkTarget(dir, op, path, base); err != nil {
			return 0, err
		}
		tmp := tempPrefix + randomSuffix()
		fd, err := paths.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err != nil {
			return 0, errnoError(op, path, err)
		}
		f := os.NewFile(uintptr(fd), path)
		undo := func(err error) (int64, error) {
			f.Close()
			_ = unix.Unlinkat(dir, tmp, 0)
			return 0, err
		}
		if err := f.Chmod(s.m.opts.FileMode); err != nil {
			return undo(errnoError(op, path, err))
		}
		if err := inheritOwner(dir, fd); err != nil {
			return undo(errnoError(op, path, err))
		}
		n, err := copyLimited(ctx, f, r, limit)
		if err != nil {
			if errors.Is(err, errOverLimit) {
				err = &fileError{op: op, path: path, why: fmt.Sprintf("over the %d-byte file limit", limit), errs: []error{ErrTooLarge, api.ErrTooLarge}}
			} else {
				err = errnoError(op, path, err)
			}
			return undo(err)
		}
		if err := f.Close(); err != nil {
			_ = unix.Unlinkat(dir, tmp, 0)
			return 0, errnoError(op, path, err)
		}
		if err := placeFile(dir, tmp, base, o.NoOverwrite); err != nil {
			_ = unix.Unlinkat(dir, tmp, 0)
			return 0, errnoError(op, path, err)
		}
		return n, nil
	})
}

// checkTarget refuses early what the rename would refuse late: a directory at
// path (the upload would be read for nothing).
func checkTarget(dir int, op, path, base string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return &fileError{op: op, path: path, why: "is a directory", errs: []error{ErrIsDirectory}}
	}
	return nil
}

// placeFile moves the finished temporary file tmp to base in dir: a rename, which
// replaces whatever non-directory is there (a link itself, not its target), or
// with noOverwrite a hard link, which fails if anything is there, then an unlink
// of tmp.
func placeFile(dir int, tmp, base string, noOverwrite bool) error {
	if !noOverwrite {
		return unix.Renameat(dir, tmp, dir, base)
	}
	if err := unix.Linkat(dir, tmp, dir, base, 0); err != nil {
		return err
	}
	return unix.Unlinkat(dir, tmp, 0)
}

// copyLimited copies r to f, failing with errOverLimit past limit bytes and with
// ctx's error when it ends. Its buffer is fixed (256 KiB), so an upload of any
// size costs the same memory.
func copyLimited(ctx context.Context, f *os.File, r io.Reader, limit int64) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		k, rerr := r.Read(buf)
		if k > 0 {
			if n+int64(k) > limit {
				return n, errOverLimit
			}
			if _, err := f.Write(buf[:k]); err != nil {
				return n, err
			}
			n += int64(k)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}
