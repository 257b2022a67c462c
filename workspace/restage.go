package workspace

import (
	"io/fs"
	"os"
	"time"
)

// Restaging an input that has not changed since it was staged copies nothing:
// agents send the same inputs with every call, and a 100 MiB copy costs tens of
// milliseconds. "Not changed" is judged on both ends by stat, as make and git do,
// but with the inode change time (ctime) too: every write, truncate, chmod or
// rename onto a file sets its ctime to now, and no process can set it back.
//
// The source must also have been stable when it was copied: a file changed within
// racyWindow of its copy may change again inside the file system's timestamp
// granularity without its stat showing it (git's "racy clean" problem), so its
// copy is not trusted on the next call, and the file is copied again.

// FileStamp identifies one version of a file; two stamps of the same file are equal
// only if nothing wrote to, truncated, chmod-ed or replaced it in between (see
// Settled for the one exception). The remote backend uses it too, to skip hashing
// inputs it pushed before.
type FileStamp struct {
	dev, ino           uint64
	size, mtime, ctime int64
}

// Stamp returns fi's stamp, or false where the platform gives no ctime.
func Stamp(fi fs.FileInfo) (FileStamp, bool) {
	st := statOf(fi)
	ctime, ok := changeTime(fi)
	return FileStamp{dev: st.dev, ino: st.ino, size: st.size, mtime: st.mtime, ctime: ctime}, ok
}

// Settled reports whether the file was last changed at least racyWindow before at,
// the time its content was read: a file changed more recently may change again
// within the file system's timestamp granularity without its stamp changing.
func (st FileStamp) Settled(at time.Time) bool {
	stable := at.Add(-racyWindow).UnixNano()
	return st.ctime < stable && st.mtime < stable
}

// restage is what a Stage call recorded of one input it copied.
type restage struct {
	src, dst FileStamp
	sum      string
}

// unchangedInput reports whether it can keep inputs/<name> (whose Lstat is dst) as
// it is: the source is the same version that was copied there, and the copy is as
// it was left. It returns the copy's recorded SHA-256.
func (s *Session) unchangedInput(it *stageItem, dst fs.FileInfo) (string, bool) {
	prev, ok := s.restaged[it.in.Name]
	if !ok || !dst.Mode().IsRegular() {
		return "", false
	}
	src, ok := Stamp(it.srcInfo)
	if !ok || src != prev.src {
		return "", false
	}
	d, ok := Stamp(dst)
	if !ok || d != prev.dst || (prev.sum == "" && s.m.opts.HashInputs) {
		return "", false
	}
	return prev.sum, true
}

// remember records a copied input for the next Stage, unless its source was
// changed so close to the copy that its stamp cannot be trusted.
func (s *Session) remember(dir *os.Root, it *stageItem, copyStart time.Time) {
	delete(s.restaged, it.in.Name)
	src, ok := Stamp(it.srcInfo)
	if !ok || !src.Settled(copyStart) {
		return
	}
	fi, err := dir.Lstat(it.in.Name)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	dst, ok := Stamp(fi)
	if !ok || dst.size != it.size {
		return
	}
	s.restaged[it.in.Name] = restage{src: src, dst: dst, sum: it.sum}
}
