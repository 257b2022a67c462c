package workspace

import (
	"cmp"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"syscall"
)

// EnforceDiskQuota holds a session that has no disk of its own to
// Options.DiskQuota: it adds up the space the files in the session directory
// take (allocated blocks, so a preallocated or sparse file counts as what it
// holds on disk) and, when that is over the limit, deletes the most recently
// modified files until it is not, which removes what the last call wrote first.
// It then returns an error matching ErrDiskQuota naming what it deleted. A
// session with a disk of its own, or without a quota, returns nil at once: its
// file system already refuses the excess.
//
// The executor runs it after each call, so between two checks a call may write
// past the limit for as long as it runs; this is the fallback for running
// without root (see DiskQuota).
func (s *Session) EnforceDiskQuota() error {
	d := s.m.disks
	if d == nil {
		return nil
	}
	if s.root == nil {
		return fmt.Errorf("disk quota: %w", ErrClosed)
	}
	if d.on() {
		if fi, err := s.root.Stat("."); err == nil && devOf(fi) != d.sessionsDev {
			return nil
		}
	}
	type file struct {
		name  string
		size  int64
		mtime int64
	}
	var files []file
	var used int64
	_ = fs.WalkDir(s.root.FS(), ".", func(name string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return nil
		}
		n := allocated(fi)
		used += n
		if e.Type().IsRegular() {
			files = append(files, file{name, n, fi.ModTime().UnixNano()})
		}
		return nil
	})
	if used <= d.size {
		return nil
	}
	slices.SortFunc(files, func(a, b file) int { return cmp.Compare(b.mtime, a.mtime) })
	before := used
	var removed []string
	for _, f := range files {
		if used <= d.size {
			break
		}
		if err := s.root.Remove(f.name); err != nil {
			continue
		}
		used -= f.size
		removed = append(removed, f.name)
	}
	s.log.Warn("session over its disk quota: deleted its newest files", "used", before, "limit", d.size, "deleted", len(removed))
	shown := removed
	if len(shown) > 5 {
		shown = append(slices.Clip(shown[:5]), fmt.Sprintf("and %d more", len(removed)-5))
	}
	return fmt.Errorf("session directory held %d bytes, over its %d-byte disk quota; deleted the %d newest files (%s), %d bytes left: %w",
		before, d.size, len(removed), strings.Join(shown, ", "), used, ErrDiskQuota)
}

// allocated is the space fi takes on disk.
func allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}
