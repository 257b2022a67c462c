package workspace

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"syscall"
	"time"

	"github.com/kernelbox/kernelbox/internal/filestamp"
	"github.com/kernelbox/kernelbox/internal/procs"
)

// racyWindow: a file modified this close to (or after) the start of a Collect may
// be modified again within the file system's timestamp granularity without its
// size or mtime changing, so the next Collect hashes it again instead of trusting
// its stat (git's "racy clean" problem).
const racyWindow = filestamp.RacyWindow

// betweenSlack allows for file timestamps lagging the clock by up to a timer tick:
// a file modified less than this before the call's code started may be the call's.
const betweenSlack = 20 * time.Millisecond

// What Collect does with one output file, by what it concluded of the same
// version (the same size, mtime and inode) before:
//
//	never seen, or changed       copy it (collectNew)
//	mark done or skipped         nothing: trusted, or already reported
//	mark racy                    hash it; copy only if the content differs
//	mark partial                 nothing copied: learn in settle whether it is complete
//	mark partialRacy             copy it again
//
// A copy ends as done or racy (by its mtime), then settle marks it partial
// when it was still being written (partialRacy if both).

// mark is what a Collect concluded of one version of a file.
type mark uint8

const (
	// done: copied whole, or unchanged: trusted while its stat stays.
	done mark = iota
	// racy: copied whole, but modified within racyWindow of the Collect, so it
	// may change again without its stat changing: hashed again next time.
	racy
	// partial: copied while still being written: looked at again each time.
	partial
	// partialRacy: both partial and racy: copied again next time.
	partialRacy
	// skipped: not copied (over MaxArtifactBytes or the session's share, or a
	// name no client could ask for) and reported: said once per version.
	skipped
)

// withPartial returns m as settle leaves it: partial (or partialRacy) when the
// file was still being written, else as it was.
func (m mark) withPartial(still bool) mark {
	switch {
	case !still:
		return m
	case m == racy:
		return partialRacy
	}
	return partial
}

// isPartial reports whether the file was still being written.
func (m mark) isPartial() bool { return m == partial || m == partialRacy }

// fileState is what a Collect saw of one output file.
type fileState struct {
	size  int64
	mtime int64 // UnixNano
	dev   uint64
	ino   uint64
	uid   uint32 // the owner, for the scan for writers (procs.OpenForWriting)
	sum   string
	mark  mark
}

func statOf(fi fs.FileInfo) fileState {
	st := fileState{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.dev, st.ino, st.uid = uint64(sys.Dev), uint64(sys.Ino), sys.Uid
	}
	return st
}

func (a fileState) sameStat(b fileState) bool {
	return a.size == b.size && a.mtime == b.mtime && a.dev == b.dev && a.ino == b.ino
}

// pending is a file the walk copied (or, collected partial before and unchanged
// since, found already copied), not yet remembered or reported: whether it was
// still being written is decided by settle, after one scan for writers covering
// every such file.
type pending struct {
	rel     string
	st      fileState // the stat taken before copying, which seen remembers
	art     Artifact
	was     mark // what the previous Collect concluded (done if it saw none)
	changed bool // the content differs from what was collected before
	moved   bool // it changed while it was copied
}

// file examines the regular file e in dir (rel below outputs/) and copies it if
// it is new or changed.
func (c *collector) file(dir *os.Root, e fs.DirEntry, rel string) {
	s := c.s
	// For a directory opened through an os.Root, ReadDir has already lstat-ed each
	// entry relative to the directory's descriptor; Info returns that.
	fi, err := e.Info()
	if err != nil {
		return // gone since readdir
	}
	if !fi.Mode().IsRegular() {
		s.log.Info("skipped output that is not a regular file", "name", rel, "type", kindOf(fi.Mode()))
		return
	}
	c.seen[rel] = true
	st := statOf(fi)
	if c.baseline {
		s.seen[rel] = st
		return
	}
	prev, known := s.seen[rel]
	if known && (prev.mark == done || prev.mark == skipped) && prev.sameStat(st) {
		return
	}
	if c.tooLarge(rel, st) {
		return
	}
	f, err := dir.OpenFile(e.Name(), openReadFlags, 0)
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("collect %q: %w", rel, bare(err)))
		return
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil || !ofi.Mode().IsRegular() || !os.SameFile(fi, ofi) {
		s.log.Warn("skipped output that changed while being opened", "name", rel)
		return
	}
	// The stat taken before copying is what is remembered: if the file changes
	// while it is copied, the next Collect sees a different stat and looks again.
	st = statOf(ofi)
	if !ofi.ModTime().Before(c.start.Add(-racyWindow)) {
		st.mark = racy
	}
	if known && prev.sameStat(st) {
		switch prev.mark {
		case partial:
			c.recheck(f, rel, st, prev)
			return
		case racy:
			if c.sameContent(f, rel, st, prev) {
				return
			}
		}
	}
	was := done
	if known {
		was = prev.mark
	}
	c.collectNew(f, rel, st, prev.sum, was)
}

// tooLarge reports (once per version, remembering it skipped) a file that is
// over MaxArtifactBytes or could never fit in the session's artifacts share.
func (c *collector) tooLarge(rel string, st fileState) bool {
	s := c.s
	var err error
	if limit := s.m.opts.MaxArtifactBytes; st.size > limit {
		err = fmt.Errorf("collect %q: %d bytes, over the %d-byte artifact limit: %w", rel, st.size, limit, ErrTooLarge)
	} else if share := s.m.ArtifactsShare(); share > 0 && st.size > share {
		err = fmt.Errorf("collect %q: %w", rel, &fullError{session: s.id, need: st.size, limit: share, whole: true})
	} else {
		return false
	}
	st.mark = skipped
	s.seen[rel] = st
	c.errs = append(c.errs, err)
	return true
}

// recheck handles a file collected while being written and unchanged since:
// the copy holds it, and all there is to learn (in settle) is whether it is
// complete now.
func (c *collector) recheck(f *os.File, rel string, st, prev fileState) {
	head := make([]byte, 512)
	n, _ := f.ReadAt(head, 0)
	// Not racy: its mtime is the one an earlier Collect found old enough.
	st.sum, st.mark = prev.sum, done
	c.pending = append(c.pending, pending{rel: rel, st: st, was: prev.mark, art: Artifact{
		Path: c.s.artifactPath(rel), Name: rel, Size: st.size, SHA256: prev.sum, MIME: detectMIME(rel, head[:n]),
	}})
}

// sameContent handles a racy file whose stat did not change: only the
// timestamp granularity makes it suspect, and it has most likely not changed,
// so it is hashed without writing a copy. It reports whether the content is the
// same (and the file remembered); else f is back at its start, to be copied.
func (c *collector) sameContent(f *os.File, rel string, st, prev fileState) bool {
	if sum, err := hashFile(f, c.s.m.opts.MaxArtifactBytes, st.size); err == nil && sum == prev.sum {
		st.sum = sum
		c.s.seen[rel] = st
		return true
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		c.errs = append(c.errs, fmt.Errorf("collect %q: %w", rel, err))
		return true // not remembered: looked at again next time
	}
	return false
}

// collectNew copies the file f (rel below outputs/, whose stat before the copy
// is st) to its artifact, and leaves it for settle. prevSum is the content
// collected before ("" for none), was what was concluded of it.
func (c *collector) collectNew(f *os.File, rel string, st fileState, prevSum string, was mark) {
	a, changed, err := c.copyArtifact(f, rel, st.size, prevSum)
	if err != nil {
		// Not remembered: tried again (and reported again) by the next Collect,
		// events or not; when the artifacts were full, space may be freed by then.
		c.errs = append(c.errs, fmt.Errorf("collect %q: %w", rel, err))
		c.watched = false
		return
	}
	// Copied were at most the bytes it had when the copy began; a file whose
	// stat moved meanwhile was being written during the copy.
	moved := a.Size != st.size
	if after, err := f.Stat(); err != nil || !statOf(after).sameStat(st) {
		moved = true
	}
	st.sum = a.SHA256
	c.pending = append(c.pending, pending{rel: rel, st: st, art: a, was: was, changed: changed, moved: moved})
}

// settle decides which of the files the walk copied were still being written,
// remembers them all, and reports those whose content changed and those that are
// complete now after an earlier partial report. A file is partial if it changed
// while it was copied, if a process holds it open for writing, or if it changed
// between its copy and that scan (a writer that closed it since).
func (c *collector) settle() {
	files, names, owners := map[procs.FileID]bool{}, map[string]bool{}, map[uint32]bool{}
	for _, p := range c.pending {
		if !p.moved {
			files[procs.FileID{Dev: p.st.dev, Ino: p.st.ino}] = true
			names[path.Base(p.rel)] = true
			owners[p.st.uid] = true
		}
	}
	var writers map[procs.FileID]bool
	if len(files) > 0 && !c.s.m.noWriterScan {
		writers = procs.OpenForWriting(files, names, owners)
	}
	for _, p := range c.pending {
		partial := p.moved || writers[procs.FileID{Dev: p.st.dev, Ino: p.st.ino}]
		if !partial {
			if fi, err := c.out.Lstat(p.rel); err == nil && !statOf(fi).sameStat(p.st) {
				partial = true
			}
		}
		p.st.mark = p.st.mark.withPartial(partial)
		if p.st.mark != done {
			c.watched = false // look again next time, events or not
		}
		c.s.seen[p.rel] = p.st
		if partial {
			c.s.log.Info("collected output still being written", "name", p.rel, "bytes", p.art.Size)
		}
		if p.changed || (p.was.isPartial() && !partial) {
			p.art.Partial = partial
			c.arts = append(c.arts, p.art)
			if !partial && p.was.isPartial() {
				c.completed = append(c.completed, p.rel)
			}
			c.mtimes[p.rel] = p.st.mtime
		}
	}
}

// note returns the notes CollectCall gives for the artifact a.
func (c *collector) note(a Artifact) []string {
	before := !c.since.IsZero() && c.mtimes[a.Name] < c.since.Add(-betweenSlack).UnixNano()
	switch {
	case a.Partial:
		n := fmt.Sprintf("outputs/%s was still being written when collected (%d bytes so far); it is collected again when it changes", a.Name, a.Size)
		if before {
			n += "; it was last written before this call's code started"
		}
		return []string{n}
	case slices.Contains(c.completed, a.Name):
		return []string{fmt.Sprintf("outputs/%s is complete now (%d bytes); an earlier call collected it while it was still being written", a.Name, a.Size)}
	case before:
		return []string{fmt.Sprintf("outputs/%s was written between calls (last modified before this call's code started), not by this call's code", a.Name)}
	}
	return nil
}
