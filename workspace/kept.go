package workspace

import (
	"cmp"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kernelbox/kernelbox/api"
)

// Open and closed session directories. The Manager counts the Sessions open on
// each directory. When the last one closes without the directory being removed
// (the executor closed the session for being idle, or is shutting down), the
// directory is kept, files and all, for the session's next incarnation, but its
// disk (Options.DiskQuota) is unmounted at once: the image file stays, and the
// next Open mounts it again. With DiskQuota set, at most Options.MaxKeptSessions
// closed directories are kept; past that the one closed longest ago is deleted
// with its disk image (its artifacts stay), and the next Open of its id finds an
// empty directory and says so (Session.Evicted). So the session disks never take
// more than (open sessions + MaxKeptSessions) × DiskQuota of the host, and only
// open sessions hold a mount and a loop device.

// DefaultMaxKeptSessions is how many closed sessions' directories a Manager
// with a DiskQuota keeps by default.
const DefaultMaxKeptSessions = 32

// maxEvicted bounds how many evicted ids a Manager remembers for Evicted.
const maxEvicted = 10000

// openedDir counts one more open Session on the directory name, which is no
// longer a kept one. Called under m.mu.
func (m *Manager) openedDir(name string) {
	if m.open == nil {
		m.open = map[string]int{}
	}
	m.open[name]++
	m.unkeep(name)
}

// unkeep drops name from the kept directories. Called under m.mu.
func (m *Manager) unkeep(name string) {
	if i := slices.Index(m.kept, name); i >= 0 {
		m.kept = slices.Delete(m.kept, i, i+1)
	}
}

// closedDir counts one Session on name closed. When it was the last, the
// directory's disk is unmounted and the directory kept, which may evict the
// oldest kept one.
func (m *Manager) closedDir(name string) {
	m.mu.Lock()
	if m.open[name] > 1 {
		m.open[name]--
		m.mu.Unlock()
		return
	}
	delete(m.open, name)
	m.forgetSession(name)
	if m.sessions == nil {
		m.mu.Unlock()
		return // Close unmounted everything
	}
	if m.disks != nil {
		if err := m.unmountDisk(name); err != nil {
			m.log.Warn("could not unmount a closed session's disk", "session", name, "err", err)
		}
	}
	var trash []string
	if _, err := m.sessions.Lstat(name); err == nil && api.ValidSessionID(name) && m.keeps() && !m.pinned(name) {
		m.kept = append(m.kept, name)
		trash = m.evictLocked()
	}
	m.mu.Unlock()
	m.emptyEvicted(trash)
}

// holdsNoFile reports whether the tree at name holds directories only.
func (m *Manager) holdsNoFile(name string) bool {
	empty := true
	err := fs.WalkDir(m.sessions.FS(), name, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			empty = false
			return fs.SkipAll
		}
		return nil
	})
	return empty && err == nil
}

// keeps reports whether closed directories are counted against
// MaxKeptSessions: only with a DiskQuota, whose product with the count bounds
// what they take.
func (m *Manager) keeps() bool { return m.opts.DiskQuota > 0 }

// maxKept is the number of closed directories kept.
func (m *Manager) maxKept() int { return max(m.opts.MaxKeptSessions, 0) }

// evictLocked deletes the images of the oldest kept directories past
// MaxKeptSessions and renames the directories to trash names, which it returns
// for emptyEvicted to delete after m.mu is released. Called under m.mu.
func (m *Manager) evictLocked() []string {
	var trash []string
	for len(m.kept) > m.maxKept() {
		name := m.kept[0]
		m.kept = m.kept[1:]
		_, t, err := m.detachLocked(name)
		if err != nil {
			m.log.Warn("could not delete a kept session directory", "session", name, "err", err)
			continue
		}
		m.log.Info("deleted the files of the session closed longest ago: more closed sessions than the workspace keeps",
			"session", name, "max_kept_sessions", m.maxKept())
		if m.evicted == nil {
			m.evicted = map[string]bool{}
		}
		if len(m.evicted) >= maxEvicted {
			for k := range m.evicted { // forget an arbitrary one
				delete(m.evicted, k)
				break
			}
		}
		m.evicted[name] = true
		if t != "" {
			trash = append(trash, t)
		}
	}
	return trash
}

// emptyEvicted deletes the trash of evicted directories (with their disks
// gone, each is an empty mount point; without, all their files).
func (m *Manager) emptyEvicted(trash []string) {
	for _, t := range trash {
		if err := removeTree(m.sessions, t); err != nil {
			m.log.Warn("could not delete an evicted session directory", "dir", t, "err", err)
		}
	}
}

// takeEvicted reports whether name was evicted since it was last open, and
// forgets it. Called under m.mu.
func (m *Manager) takeEvicted(name string) bool {
	if !m.evicted[name] {
		return false
	}
	delete(m.evicted, name)
	return true
}

// setupKept counts the session directories an earlier run left as kept, oldest
// first by when they were last written (the disk image's mtime, else the
// directory's), and evicts those past MaxKeptSessions. Called from New.
func (m *Manager) setupKept() {
	m.Pin(m.opts.Pinned...)
	names, _ := readNames(m.sessionsDir)
	for _, n := range names {
		// A warm kernel's directory an earlier run left (a SIGKILL): its
		// kernel or container is gone or reaped, and no session names it.
		// Only an empty one: a resume whose move failed leaves the session's
		// files there, named in its error (ErrStranded), for the operator.
		if isWarmID(n) && m.holdsNoFile(n) {
			if err := m.Remove(n); err != nil {
				m.log.Warn("could not remove a warm directory an earlier run left", "dir", n, "err", err)
			}
		}
	}
	if !m.keeps() {
		return
	}
	type dir struct {
		name  string
		mtime int64
	}
	var dirs []dir
	for _, n := range names {
		if !api.ValidSessionID(n) {
			continue // warm and trash directories are removed, not kept
		}
		if m.keepsMount(filepath.Join(m.sessionsDir, n)) {
			continue // a live session a restarted server adopts
		}
		if m.pinned(n) {
			continue // a hibernated session's (Pin)
		}
		fi, err := m.sessions.Lstat(n)
		if err != nil || !fi.IsDir() {
			continue
		}
		if m.disks.on() {
			if img, err := m.disks.images.Stat(n); err == nil {
				fi = img
			}
		}
		dirs = append(dirs, dir{n, fi.ModTime().UnixNano()})
	}
	slices.SortFunc(dirs, func(a, b dir) int { return cmp.Or(cmp.Compare(a.mtime, b.mtime), strings.Compare(a.name, b.name)) })
	m.mu.Lock()
	for _, d := range dirs {
		m.kept = append(m.kept, d.name)
	}
	trash := m.evictLocked()
	m.mu.Unlock()
	m.emptyEvicted(trash)
}

// KeptSessions returns the ids of the closed session directories the Manager
// keeps, closed longest ago first (empty without a DiskQuota, when they are not
// counted).
func (m *Manager) KeptSessions() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.kept)
}

// Evicted reports whether Open found that this session's directory, kept after
// its previous incarnation closed, had been deleted since to keep no more than
// Options.MaxKeptSessions closed sessions: the session starts with an empty
// directory, its earlier files gone (its artifacts stay).
func (s *Session) Evicted() bool { return s.evicted }
