package workspace

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/kernelbox/kernelbox/internal/paths"
)

// Session is one session directory: <Root>/sessions/<id> with inputs/ (files staged
// for the code), outputs/ (what the code leaves for the agent) and, when data is
// added, data/.
//
// A Session is not safe for concurrent use: the executor serializes the calls for
// one session, which also keeps Stage and Collect from racing each other. Different
// Sessions may be used concurrently. A Session holds an open handle on its
// directory; Close releases it.
type Session struct {
	m   *Manager
	id  string
	dir string
	log *slog.Logger

	// root is the session directory, opened once: it follows the directory through
	// Adopt's rename, and nothing the kernel does to paths can make it point
	// elsewhere. nil once closed or adopted.
	root *os.Root

	// art is <artifacts>/<id>, opened on first use.
	art *os.Root

	// staged maps each input name to the size it was staged with, for
	// MaxSessionBytes.
	staged map[string]int64

	// restaged is what was copied to each name, to skip copying it again
	// (restage.go).
	restaged map[string]restage

	// seen is what the last Collect saw of each file in outputs/, by slash path.
	seen map[string]fileState

	// reused: the directory was there before Open (an earlier incarnation's);
	// leftover is how many files its outputs/ held then (see baseline).
	reused   bool
	leftover int

	// first: no other Session of the Manager was open on the directory when
	// this one was opened; evicted: see Evicted.
	first   bool
	evicted bool

	// watched is set when the last walk put an inotify watch on every directory of
	// outputs/; dirty when an event arrived for one since (watch.go).
	watched  bool
	dirty    atomic.Bool
	lastWalk time.Time
}

// ID returns the session id (".warm-…" for a warm session).
func (s *Session) ID() string { return s.id }

// Dir returns the absolute host path of the session directory.
func (s *Session) Dir() string { return s.dir }

// Close releases the session's directory handles. It does not remove anything:
// when it was the last Session open on the directory, the directory is kept
// for the session's next incarnation with its disk unmounted (see
// Options.MaxKeptSessions).
func (s *Session) Close() error {
	// Load, not watcher(): a session that never collected starts no watcher, and
	// another session's first Collect may be starting it right now.
	if w := s.m.watch.Load(); w != nil {
		w.forget(s)
	}
	var err error
	opened := s.root != nil
	if opened {
		err = s.root.Close()
	}
	if s.art != nil {
		err = errors.Join(err, s.art.Close())
	}
	s.root, s.art = nil, nil
	if opened {
		s.m.closedDir(s.id)
	}
	return err
}

// init makes inputs/ and outputs/ real directories, counts what inputs/ holds and
// removes temporary files an interrupted Stage left there.
func (s *Session) init() error {
	out, err := ensureDir(s.root, "outputs", s.m.opts.DirMode)
	if err != nil {
		return fmt.Errorf("outputs: %w", err)
	}
	out.Close()
	in, err := ensureDir(s.root, "inputs", s.m.opts.DirMode)
	if err != nil {
		return fmt.Errorf("inputs: %w", err)
	}
	defer in.Close()
	d, err := in.Open(".")
	if err != nil {
		return fmt.Errorf("inputs: %w", err)
	}
	defer d.Close()
	for {
		entries, err := d.ReadDir(256)
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			if paths.IsTemp(e.Name()) {
				// Left by a Stage that was killed midway.
				_ = in.Remove(e.Name())
				continue
			}
			if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
				s.staged[e.Name()] = fi.Size()
			}
		}
		if err != nil {
			break
		}
	}
	return nil
}

// stagedBytes is the total counted against MaxSessionBytes.
func (s *Session) stagedBytes() int64 {
	var n int64
	for _, size := range s.staged {
		n += size
	}
	return n
}

// artifactsRoot returns <artifacts>/<id>, creating it on first use, and again
// when it (or the whole artifacts directory) was removed or replaced since. Then
// the copies of earlier calls are gone: the session forgets what it collected, so
// that the next Collect copies everything in outputs/ again.
func (s *Session) artifactsRoot() (*os.Root, error) {
	if s.root == nil {
		return nil, ErrClosed
	}
	all, err := s.m.artifactsRoot()
	if err != nil {
		return nil, err
	}
	if s.art != nil {
		now, err := all.Lstat(s.id)
		if err == nil && now.IsDir() {
			if held, err := s.art.Stat("."); err == nil && os.SameFile(held, now) {
				return s.art, nil
			}
		}
		s.log.Warn("session's artifacts dir was removed or replaced; recreating it")
		s.art.Close()
		s.art = nil
		clear(s.seen)
		s.watched = false
	}
	if err := mkdirs(all, s.id, s.m.opts.DirMode); err != nil {
		return nil, err
	}
	art, err := openDir(all, s.id)
	if err != nil {
		return nil, err
	}
	s.art = art
	return art, nil
}

// Reused reports whether Open found the session directory already there (left by an
// earlier incarnation of the session: a previous kernelbox run, or a session closed
// as idle) and how many files its outputs/ held. Those files are kept, and no call
// reports them as its artifacts unless it changes them.
func (s *Session) Reused() (bool, int) { return s.reused, s.leftover }
