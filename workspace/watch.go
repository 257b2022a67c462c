//go:build linux

package workspace

import (
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Collect runs after every call, and most calls write nothing to outputs/. Walking
// outputs/ costs a dozen system calls and ~0.1 ms, a measurable part of a small
// cell's round trip, so the Manager watches each session's outputs/ tree with one
// inotify instance (Linux) and Collect skips the walk when nothing under it changed
// since the last one. Any doubt means a walk: the first Collect of a session, a queue
// overflow, a watch that could not be added, and every fullWalkEvery regardless
// (inotify does not see writes through a shared memory mapping).

const fullWalkEvery = time.Second

const watchMask = syscall.IN_CREATE | syscall.IN_MODIFY | syscall.IN_CLOSE_WRITE | syscall.IN_MOVED_TO |
	syscall.IN_MOVED_FROM | syscall.IN_DELETE | syscall.IN_ATTRIB | syscall.IN_DELETE_SELF |
	syscall.IN_MOVE_SELF | syscall.IN_ONLYDIR

// watcher is the Manager's inotify instance and which session each watch belongs to.
type watcher struct {
	mu     sync.Mutex
	fd     int
	buf    []byte
	owners map[int32]*Session
}

// watcher returns the Manager's watcher, creating it on first use, or nil when
// inotify is not available (then every Collect walks).
func (m *Manager) watcher() *watcher {
	m.watchOnce.Do(func() {
		fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
		if err != nil {
			m.log.Info("inotify unavailable; every Collect walks outputs/", "err", err)
			return
		}
		m.watch.Store(&watcher{fd: fd, buf: make([]byte, 64<<10), owners: map[int32]*Session{}})
	})
	return m.watch.Load()
}

// add watches the open directory d for s. Adding and recording happen under the
// lock that drain holds, so no event of the new watch can be read unattributed.
func (w *watcher) add(s *Session, d *os.File) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	// The descriptor's /proc path names exactly the directory that was opened, even
	// if the path it was opened by has been swapped since.
	wd, err := syscall.InotifyAddWatch(w.fd, "/proc/self/fd/"+strconv.Itoa(int(d.Fd())), watchMask)
	if err != nil {
		return false
	}
	w.owners[int32(wd)] = s
	return true
}

// drain reads every pending event and marks the sessions they belong to dirty.
func (w *watcher) drain() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		n, err := syscall.Read(w.fd, w.buf)
		if n <= 0 || err != nil {
			return // EAGAIN: nothing more
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(pointerAt(w.buf, off))
			switch {
			case ev.Mask&syscall.IN_Q_OVERFLOW != 0:
				for _, s := range w.owners {
					s.dirty.Store(true)
				}
			case ev.Mask&syscall.IN_IGNORED != 0:
				if s := w.owners[ev.Wd]; s != nil {
					s.dirty.Store(true)
				}
				delete(w.owners, ev.Wd)
			default:
				if s := w.owners[ev.Wd]; s != nil {
					s.dirty.Store(true)
				}
			}
			off += syscall.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

// forget removes s's watches.
func (w *watcher) forget(s *Session) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for wd, owner := range w.owners {
		if owner == s {
			_, _ = syscall.InotifyRmWatch(w.fd, uint32(wd))
			delete(w.owners, wd)
		}
	}
}

func (w *watcher) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = syscall.Close(w.fd)
	w.owners = nil
}

// unchanged reports whether s's outputs/ is known not to have changed since its
// last walk, so that Collect may skip walking it.
func (s *Session) unchanged() bool {
	w := s.m.watcher()
	if w == nil || !s.watched || time.Since(s.lastWalk) >= fullWalkEvery {
		return false
	}
	w.drain()
	return !s.dirty.Load()
}
