package workspace

import (
	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/paths"
	"github.com/kernelbox/kernelbox/internal/procs"

	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// maxDepth is how many directory levels below outputs/ Collect descends.
const maxDepth = 32

// racyWindow: a file modified this close to (or after) the start of a Collect may
// be modified again within the file system's timestamp granularity without its
// size or mtime changing, so the next Collect hashes it again instead of trusting
// its stat (git's "racy clean" problem).
const racyWindow = time.Second

// Artifact is a file copied into the shared artifacts directory; see api.Artifact.
type Artifact = api.Artifact

// fileState is what a Collect saw of one output file.
type fileState struct {
	size    int64
	mtime   int64 // UnixNano
	dev     uint64
	ino     uint64
	uid     uint32 // the owner, for the scan for writers (procs.OpenForWriting)
	sum     string
	racy    bool // modified close to the Collect that saw it: hash again next time
	skipped bool // over MaxArtifactBytes, already reported
	partial bool // still being written when collected: look again next time
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

// collector is the state of one Collect walk.
type collector struct {
	s         *Session
	start     time.Time
	entries   int  // entries examined, for MaxArtifactFiles
	truncated bool // walk stopped early: keep state of files not seen
	seen      map[string]bool
	dirs      map[string]*os.Root // artifact directories opened so far, by slash path
	arts      []Artifact
	errs      []error

	// baseline: record what is there without copying or reporting it (see
	// Session.baseline).
	baseline bool

	// watch is the Manager's watcher (nil without inotify); watched stays set while
	// every directory walked got a watch and nothing needs a second look.
	watch   *watcher
	watched bool

	// out is outputs/; pending the files copied, whose completeness settle decides
	// once the walk is over. since is when the call's code started (zero: unknown);
	// mtimes (UnixNano) and completed (complete after a partial report) are what
	// the notes need of the files reported.
	out       *os.Root
	pending   []pending
	since     time.Time
	mtimes    map[string]int64
	completed []string
}

// pending is a file the walk copied (or, collected partial before and unchanged
// since, found already copied), not yet remembered or reported: whether it was
// still being written is decided by settle, after one scan for writers covering
// every such file.
type pending struct {
	rel        string
	st         fileState // the stat taken before copying, which seen remembers
	art        Artifact
	changed    bool // the content differs from what was collected before
	moved      bool // it changed while it was copied
	wasPartial bool // the previous Collect found it still being written
}

// betweenSlack allows for file timestamps lagging the clock by up to a timer tick:
// a file modified less than this before the call's code started may be the call's.
const betweenSlack = 20 * time.Millisecond

// Collect copies the files in outputs/ that are new or changed since this
// Session's previous Collect to <artifacts>/<id>/<path>, and returns them sorted by
// Name. Subdirectories are kept.
//
// A file counts as unchanged, and is neither opened nor hashed, while its size,
// mtime and inode stay the same; when they change it is hashed, and a file
// rewritten with identical content is not reported again. Only regular files are
// collected: symlinks, FIFOs, devices and sockets are skipped (and logged), never
// followed or opened. Every artifact reported can be downloaded by its Name: a
// file or directory whose name starts with ".kb-tmp-" (kernelbox's temporary
// files) or is not valid UTF-8 is left out (ErrSkippedName, reported once). Each
// artifact is written to a temporary file and renamed into place. A file deleted
// from outputs/ keeps its artifact.
//
// Collect returns the artifacts it copied even when it also returns an error. The
// error joins what it could not collect: files over MaxArtifactBytes (ErrTooLarge,
// reported once per version of the file), directories more than 32 levels deep
// (ErrTooDeep), entries beyond MaxArtifactFiles (ErrTooManyFiles), an outputs/ that
// is not a directory, and I/O failures. A file that could not be copied is tried
// again by the next Collect.
//
// If the artifacts directory, or the session's part of it, was removed or
// replaced since the last Collect, it is created again, and every file in
// outputs/ is copied (and reported) again.
//
// A file that is still being written is copied as it is and reported with
// Partial set: on Linux, one that a process this one may inspect (the same user,
// or any as root) holds open for writing; anywhere, one whose size or mtime
// changed while it was copied. The copy holds a consistent prefix: at most the
// size the file had when its copy began. Such a file is looked at again by every
// Collect until it is complete, and reported again when its content changes or it
// is found complete, even if its stat stayed the same.
func (s *Session) Collect() ([]Artifact, error) {
	arts, _, err := s.CollectCall(time.Time{})
	return arts, err
}

// CollectCall is Collect after a call whose code started at start. It also
// returns a note for each artifact the call's code may not have written in full:
// one still being written, one an earlier call reported partial that is complete
// now, and one last modified before start (by something still running from an
// earlier call, since the previous Collect had not seen that version). A zero start
// notes only the first two.
func (s *Session) CollectCall(start time.Time) (arts []Artifact, notes []string, err error) {
	if s.root == nil {
		return nil, nil, fmt.Errorf("collect: %w", ErrClosed)
	}
	// Before the inotify shortcut: with the artifacts gone (artifactsRoot notices
	// and forgets what was collected), an unchanged outputs/ still has everything
	// to copy again. A failure here shows again where a file is copied.
	if s.art != nil {
		_, _ = s.artifactsRoot()
	}
	if s.unchanged() {
		return nil, nil, nil
	}
	// Cleared before the walk: a change during it marks the session again.
	s.dirty.Store(false)
	walkStart := time.Now()
	out, err := openDir(s.root, "outputs")
	if errors.Is(err, fs.ErrNotExist) {
		s.log.Info("outputs/ is missing; nothing to collect")
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("collect: outputs/: %w", err)
	}
	defer out.Close()
	c := &collector{s: s, start: time.Now(), seen: map[string]bool{}, watch: s.m.watcher(), watched: true,
		out: out, since: start, mtimes: map[string]int64{}}
	c.walk(out, "", 0)
	c.settle()
	s.watched, s.lastWalk = c.watch != nil && c.watched && !c.truncated, walkStart
	for _, r := range c.dirs {
		r.Close()
	}
	if !c.truncated {
		// Forget files that are gone, so the map cannot grow without bound; a file
		// that comes back is reported as new.
		for name := range s.seen {
			if !c.seen[name] {
				delete(s.seen, name)
			}
		}
	}
	slices.SortFunc(c.arts, func(a, b Artifact) int { return cmp.Compare(a.Name, b.Name) })
	for _, a := range c.arts {
		notes = append(notes, c.note(a)...)
	}
	return c.arts, notes, errors.Join(c.errs...)
}

// walk visits the directory dir, whose slash path below outputs/ is prefix.
func (c *collector) walk(dir *os.Root, prefix string, depth int) {
	d, err := dir.Open(".")
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("collect %q: %w", prefix, err))
		c.watched = false
		return
	}
	defer d.Close()
	if c.watch != nil && !c.watch.add(c.s, d) {
		c.watched = false
	}
	for {
		entries, err := d.ReadDir(256)
		for _, e := range entries {
			// Every entry counts, so that a million empty directories or links
			// cannot make Collect slow either.
			if c.entries >= c.s.m.opts.MaxArtifactFiles {
				c.truncated = true
				c.errs = append(c.errs, fmt.Errorf("collect: outputs/ holds more than %d entries; the rest were not collected: %w",
					c.s.m.opts.MaxArtifactFiles, ErrTooManyFiles))
				return
			}
			c.entries++
			rel := path.Join(prefix, e.Name())
			if why := unservable(e.Name()); why != "" {
				c.skipName(e, rel, why)
				continue
			}
			switch t := e.Type(); {
			case t.IsDir():
				if depth+1 > maxDepth {
					c.errs = append(c.errs, fmt.Errorf("collect %q: more than %d levels below outputs/: %w", rel, maxDepth, ErrTooDeep))
					c.watched = false
					continue
				}
				sub, err := openDir(dir, e.Name())
				if err != nil {
					c.s.log.Warn("skipped output directory", "name", rel, "err", err)
					c.watched = false
					continue
				}
				c.walk(sub, rel, depth+1)
				sub.Close()
				if c.truncated {
					return
				}
			case t.IsRegular():
				c.file(dir, e, rel)
			default:
				c.s.log.Info("skipped output that is not a regular file", "name", rel, "type", kindOf(t))
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			c.errs = append(c.errs, fmt.Errorf("collect %q: %w", prefix, err))
			// The unread rest of the directory was not seen: keep what is known of it.
			c.truncated = true
			return
		}
	}
}

// unservable says why an entry of outputs/ named name could not be downloaded by
// the name Collect would report (paths.Listed), or "" when it can. Each artifact
// reported must be one a client can fetch back.
func unservable(name string) string {
	var e *paths.Error
	if errors.As(paths.CheckName(name, paths.Listed), &e) {
		return e.Problem.String()
	}
	return ""
}

// skipName leaves the entry e (rel below outputs/) out, saying why once: once per
// version of a file, once for a directory (its contents are not looked at).
func (c *collector) skipName(e fs.DirEntry, rel, why string) {
	key := rel
	if e.IsDir() {
		key += "/" // a directory's key; no file's name ends in "/"
	}
	fi, err := e.Info()
	if err != nil {
		return // gone since readdir
	}
	st := statOf(fi)
	c.seen[key] = true
	prev, known := c.s.seen[key]
	if known && (e.IsDir() || prev.sameStat(st)) {
		return
	}
	st.skipped = true
	c.s.seen[key] = st
	c.s.log.Info("skipped output whose name cannot be served", "name", rel, "why", why)
	c.errs = append(c.errs, fmt.Errorf("collect %q: %s: %w", rel, why, ErrSkippedName))
}

// file examines the regular file e in dir (rel below outputs/) and copies it if
// it is new or changed.
func (c *collector) file(dir *os.Root, e fs.DirEntry, rel string) {
	s := c.s
	name := e.Name()
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
	if known && !prev.racy && !prev.partial && prev.sameStat(st) {
		return
	}
	limit := s.m.opts.MaxArtifactBytes
	if fi.Size() > limit {
		st.skipped = true
		s.seen[rel] = st
		c.errs = append(c.errs, fmt.Errorf("collect %q: %d bytes, over the %d-byte artifact limit: %w", rel, fi.Size(), limit, ErrTooLarge))
		return
	}
	if share := s.m.ArtifactsShare(); share > 0 && fi.Size() > share {
		// It could never fit: said once per version, as a file over the limit is.
		st.skipped = true
		s.seen[rel] = st
		c.errs = append(c.errs, fmt.Errorf("collect %q: %w", rel, &fullError{session: s.id, need: fi.Size(), limit: share, whole: true}))
		return
	}
	f, err := dir.OpenFile(name, openReadFlags, 0)
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
	racy := !ofi.ModTime().Before(c.start.Add(-racyWindow))
	if known && prev.partial && !prev.racy && prev.sameStat(st) {
		// Collected while being written and unchanged since: the copy holds it,
		// and all there is to learn is whether it is complete now.
		head := make([]byte, 512)
		n, _ := f.ReadAt(head, 0)
		st.sum = prev.sum
		c.pending = append(c.pending, pending{rel: rel, st: st, wasPartial: true, art: Artifact{
			Path: s.artifactPath(rel), Name: rel, Size: st.size, SHA256: prev.sum, MIME: detectMIME(rel, head[:n]),
		}})
		return
	}
	if known && prev.racy && !prev.partial && prev.sameStat(st) {
		// Only the timestamp granularity makes this file suspect, and it has most
		// likely not changed: hash it without writing a copy.
		if sum, err := hashFile(f, limit, ofi.Size()); err == nil && sum == prev.sum {
			st.sum, st.racy = sum, racy
			s.seen[rel] = st
			return
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			c.errs = append(c.errs, fmt.Errorf("collect %q: %w", rel, err))
			return
		}
	}
	a, changed, err := c.copyArtifact(f, rel, ofi.Size(), prev.sum)
	if errors.Is(err, ErrArtifactsFull) {
		// Not remembered: tried again (and reported again) by the next Collect,
		// when space may have been freed.
		c.errs = append(c.errs, fmt.Errorf("collect %q: %w", rel, err))
		c.watched = false
		return
	}
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("collect %q: %w", rel, err))
		c.watched = false // try again next time, events or not
		return
	}
	// Copied were at most the bytes it had when the copy began; a file whose
	// stat moved meanwhile was being written during the copy.
	moved := a.Size != ofi.Size()
	if after, err := f.Stat(); err != nil || !statOf(after).sameStat(st) {
		moved = true
	}
	st.sum, st.racy = a.SHA256, racy
	c.pending = append(c.pending, pending{rel: rel, st: st, art: a, changed: changed, moved: moved, wasPartial: known && prev.partial})
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
		p.st.partial = partial
		if partial || p.st.racy {
			c.watched = false // look again next time, events or not
		}
		c.s.seen[p.rel] = p.st
		if partial {
			c.s.log.Info("collected output still being written", "name", p.rel, "bytes", p.art.Size)
		}
		if p.changed || (p.wasPartial && !partial) {
			p.art.Partial = partial
			c.arts = append(c.arts, p.art)
			if !partial && p.wasPartial {
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

// copyArtifact copies the first size bytes of src to the artifact rel, hashing as
// it goes. If the content hashes to prevSum it discards the copy (the artifact
// already holds it) and returns changed == false.
func (c *collector) copyArtifact(src *os.File, rel string, size int64, prevSum string) (a Artifact, changed bool, err error) {
	s := c.s
	dir, err := c.artifactDir(path.Dir(rel))
	if err != nil {
		return Artifact{}, false, err
	}
	// Counted against the budget before the copy, net of the artifact it
	// replaces (for a moment both exist: one file's worth of overshoot).
	old := replacedSize(dir, path.Base(rel))
	if err := s.m.reserve(s.id, size-old); err != nil {
		return Artifact{}, false, err
	}
	reserved := size - old
	f, tmp, err := createTemp(dir, "", s.m.opts.FileMode)
	if err != nil {
		s.m.release(s.id, reserved)
		return Artifact{}, false, err
	}
	defer func() {
		if tmp != "" {
			_ = dir.Remove(tmp)
			s.m.release(s.id, reserved)
		}
	}()
	// No more than size: a file appended to faster than it is copied would
	// otherwise be chased up to MaxArtifactBytes. Collect marks the short copy
	// partial.
	cp, err := copyFile(f, io.LimitReader(src, size), s.m.opts.MaxArtifactBytes, size, true)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Artifact{}, false, err
	}
	// A file that shrank while it was copied is counted as copied.
	s.m.release(s.id, size-cp.n)
	reserved = cp.n - old
	a = Artifact{
		Path:   s.artifactPath(rel),
		Name:   rel,
		Size:   cp.n,
		SHA256: cp.sum,
		MIME:   detectMIME(rel, cp.head),
	}
	if cp.sum == prevSum {
		return a, false, nil
	}
	if err := dir.Rename(tmp, path.Base(rel)); err != nil {
		return Artifact{}, false, err
	}
	tmp = ""
	s.log.Debug("collected artifact", "name", rel, "bytes", cp.n)
	return a, true, nil
}

// hashFile returns the hex SHA-256 of what is left to read of f, failing with
// errOverLimit past limit bytes. sizeHint sizes the buffer.
func hashFile(f *os.File, limit, sizeHint int64) (string, error) {
	h := sha256.New()
	buf := make([]byte, min(max(sizeHint+1, 4096), 64<<10))
	n, err := io.CopyBuffer(h, onlyReader{&io.LimitedReader{R: f, N: limit + 1}}, buf)
	if err != nil {
		return "", err
	}
	if n > limit {
		return "", errOverLimit
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// artifactDir returns a Root on the directory rel (slash path, "." for the top) of
// the session's artifacts, creating it if needed. The Roots are kept for the rest
// of the Collect, so that files in one directory do not each walk the path again.
func (c *collector) artifactDir(rel string) (*os.Root, error) {
	if r, ok := c.dirs[rel]; ok {
		return r, nil
	}
	art, err := c.s.artifactsRoot()
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return art, nil
	}
	if err := mkdirs(art, rel, c.s.m.opts.DirMode); err != nil {
		return nil, err
	}
	r, err := openDir(art, rel)
	if err != nil {
		return nil, err
	}
	if c.dirs == nil {
		c.dirs = map[string]*os.Root{}
	}
	c.dirs[rel] = r
	return r, nil
}

// artifactPath is the host path of the artifact rel of this session.
func (s *Session) artifactPath(rel string) string {
	return filepath.Join(s.m.artifactsDir, s.id, filepath.FromSlash(rel))
}

// baseline records the files outputs/ already holds when a session directory is
// opened again (a kernelbox restart, a session closed by idle culling): they were
// written by an earlier incarnation, so no later call reports them as its own unless
// it changes them. It returns how many files it found.
func (s *Session) baseline() int {
	out, err := openDir(s.root, "outputs")
	if err != nil {
		return 0
	}
	defer out.Close()
	c := &collector{s: s, start: time.Now(), seen: map[string]bool{}, baseline: true}
	c.walk(out, "", 0)
	for _, r := range c.dirs {
		r.Close()
	}
	n := 0
	for name := range c.seen {
		if st, ok := s.seen[name]; ok && !st.skipped {
			n++
		}
	}
	return n
}
