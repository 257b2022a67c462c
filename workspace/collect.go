package workspace

import (
	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/paths"

	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"time"
)

// maxDepth is how many directory levels below outputs/ Collect descends.
const maxDepth = 32

// Artifact is a file copied into the shared artifacts directory; see api.Artifact.
type Artifact = api.Artifact

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
	st.mark = skipped
	c.s.seen[key] = st
	c.s.log.Info("skipped output whose name cannot be served", "name", rel, "why", why)
	c.errs = append(c.errs, fmt.Errorf("collect %q: %s: %w", rel, why, ErrSkippedName))
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
		if st, ok := s.seen[name]; ok && st.mark != skipped {
			n++
		}
	}
	return n
}
