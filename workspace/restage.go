package workspace

import (
	"io/fs"
	"os"
	"time"

	"github.com/kernelbox/kernelbox/internal/filestamp"
)

// Restaging an input that has not changed since it was staged copies nothing:
// agents send the same inputs with every call, and a 100 MiB copy costs tens of
// milliseconds. "Not changed" is judged by both ends' stamps (internal/filestamp):
// stat with the inode change time, and a source stable when it was copied.

// restage is what a Stage call recorded of one input it copied.
type restage struct {
	src, dst filestamp.Stamp
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
	src, ok := filestamp.Of(it.srcInfo)
	if !ok || src != prev.src {
		return "", false
	}
	d, ok := filestamp.Of(dst)
	if !ok || d != prev.dst || (prev.sum == "" && s.m.opts.HashInputs) {
		return "", false
	}
	return prev.sum, true
}

// remember records a copied input for the next Stage, unless its source was
// changed so close to the copy that its stamp cannot be trusted.
func (s *Session) remember(dir *os.Root, it *stageItem, copyStart time.Time) {
	delete(s.restaged, it.in.Name)
	src, ok := filestamp.Of(it.srcInfo)
	if !ok || !src.Settled(copyStart) {
		return
	}
	fi, err := dir.Lstat(it.in.Name)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	dst, ok := filestamp.Of(fi)
	if !ok || dst.Size() != it.size {
		return
	}
	s.restaged[it.in.Name] = restage{src: src, dst: dst, sum: it.sum}
}
