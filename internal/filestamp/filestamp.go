// Package filestamp identifies one version of a file by what stat says of it, so
// that a copy of a file that has not changed since it was last copied is skipped:
// the workspace restaging a call's inputs, kernelfs pushing them to a kernel.
// Start at [Of].
//
// "Not changed" is judged by stat, as make and git do, but with the inode change
// time (ctime) too: every write, truncate, chmod or rename onto a file sets its
// ctime to now, and no process can set it back. The source must also have been
// stable when it was copied: a file changed within [RacyWindow] of its copy may
// change again inside the file system's timestamp granularity without its stat
// showing it (git's "racy clean" problem), so such a copy is not to be trusted
// ([Stamp.Settled]).
package filestamp

import (
	"io/fs"
	"syscall"
	"time"
)

// RacyWindow is how long before a copy a file must have last changed for its
// stamp to be trusted: longer than any file system's timestamp granularity.
const RacyWindow = time.Second

// Stamp identifies one version of a file; two stamps of the same file are equal
// only if nothing wrote to, truncated, chmod-ed or replaced it in between (see
// Settled for the one exception). Stamps compare with ==.
type Stamp struct {
	dev, ino           uint64
	size, mtime, ctime int64
}

// Of returns fi's stamp, and false where the platform gives no ctime (then the
// stamp must not be trusted: the file is copied every time).
func Of(fi fs.FileInfo) (Stamp, bool) {
	st := Stamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.dev, st.ino = uint64(sys.Dev), uint64(sys.Ino)
	}
	ctime, ok := changeTime(fi)
	st.ctime = ctime
	return st, ok
}

// Size is the file's size in bytes when it was stamped.
func (st Stamp) Size() int64 { return st.size }

// Settled reports whether the file was last changed at least RacyWindow before
// at, the time its content was read: a file changed more recently may change
// again within the file system's timestamp granularity without its stamp
// changing.
func (st Stamp) Settled(at time.Time) bool {
	stable := at.Add(-RacyWindow).UnixNano()
	return st.ctime < stable && st.mtime < stable
}
