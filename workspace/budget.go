package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// recountEvery is how long a refusal trusts the running count of the artifacts
// directory before walking it again: files deleted by the operator since the
// last walk are only noticed by a walk.
const recountEvery = 10 * time.Second

// budget holds the artifacts directory to Options.MaxArtifactsTotalBytes, and
// each session's part of it to its share (Options.MaxSessionArtifactsBytes:
// the disk quota, at most half the total). The total is counted by walking the
// directory when the Manager starts, a session's part when it first reserves;
// both are kept up by every write and removal through the Manager, and a refusal
// walks again (at most every recountEvery) so that space freed by hand is seen.
//
// Sizes are apparent sizes (st_size), counted before a copy: a sparse file
// counts as what a copy of it, and a client downloading it, takes, so a kernel
// cannot slip a 1000 MiB file of holes past either limit. The share is why one
// session can never make another's artifacts be refused: alone it holds at
// most half of the total, and never more than it could hold on its own disk
// (its quota), however many calls it makes.
//
// Artifacts are refused, never evicted: an agent may still be reading any
// artifact it was told about, and what to delete is the operator's call.
type budget struct {
	limit int64 // total, 0 for none
	share int64 // per session, 0 for none

	mu        sync.Mutex
	used      int64
	recounted time.Time
	sessions  map[string]*sessionUse // by session id, while it has Sessions open
}

// sessionUse is what one session's artifacts take.
type sessionUse struct {
	used      int64
	recounted time.Time
}

// setupBudget counts the artifacts directory when a total limit is set, and
// works out the per-session share.
func (m *Manager) setupBudget() {
	share := m.opts.MaxSessionArtifactsBytes
	if share == 0 {
		share = m.opts.DiskQuota
	}
	if total := m.opts.MaxArtifactsTotalBytes; total > 0 && (share <= 0 || share > total/2) {
		share = total / 2
	}
	share = max(share, 0)
	if m.opts.MaxArtifactsTotalBytes <= 0 && share == 0 {
		return
	}
	b := &budget{limit: max(m.opts.MaxArtifactsTotalBytes, 0), share: share, sessions: map[string]*sessionUse{}}
	if b.limit > 0 {
		b.used, b.recounted = m.countArtifacts(""), time.Now()
	}
	m.budget = b
}

// countArtifacts sums the sizes of the regular files under the artifacts
// directory, or under its sub-directory id.
func (m *Manager) countArtifacts(id string) int64 {
	var n int64
	_ = filepath.WalkDir(filepath.Join(m.artifactsDir, id), func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// ArtifactsUsage returns the bytes counted in the artifacts directory and the
// limit, both 0 without Options.MaxArtifactsTotalBytes.
func (m *Manager) ArtifactsUsage() (used, limit int64) {
	b := m.budget
	if b == nil || b.limit == 0 {
		return 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.limit
}

// ArtifactsShare returns how many bytes of artifacts one session may hold
// (Options.MaxSessionArtifactsBytes as worked out), 0 for no limit.
func (m *Manager) ArtifactsShare() int64 {
	if m.budget == nil {
		return 0
	}
	return m.budget.share
}

// reserve counts n more bytes of session id's artifacts against its share and
// the total, or fails with a fullError (ErrArtifactsFull) when they do not fit.
func (m *Manager) reserve(id string, n int64) error {
	b := m.budget
	if b == nil {
		return nil
	}
	var su *sessionUse
	if b.share > 0 {
		su = m.sessionUse(id)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if su != nil {
		if su.used+n > b.share && time.Since(su.recounted) >= recountEvery {
			su.used, su.recounted = m.countArtifacts(id), time.Now()
		}
		if su.used+n > b.share {
			return &fullError{session: id, need: n, used: su.used, limit: b.share}
		}
	}
	if b.limit > 0 {
		if b.used+n > b.limit && time.Since(b.recounted) >= recountEvery {
			b.used, b.recounted = m.countArtifacts(""), time.Now()
		}
		if b.used+n > b.limit {
			return &fullError{need: n, used: b.used, limit: b.limit}
		}
	}
	b.used += n
	if su != nil {
		su.used += n
	}
	return nil
}

// sessionUse returns the count of session id's artifacts, walking its part of
// the artifacts directory (outside the lock) the first time.
func (m *Manager) sessionUse(id string) *sessionUse {
	b := m.budget
	b.mu.Lock()
	su := b.sessions[id]
	b.mu.Unlock()
	if su != nil {
		return su
	}
	counted := &sessionUse{used: m.countArtifacts(id), recounted: time.Now()}
	b.mu.Lock()
	defer b.mu.Unlock()
	if su = b.sessions[id]; su == nil {
		su = counted
		b.sessions[id] = su
	}
	return su
}

// release gives n bytes of session id's artifacts back (negative n takes more
// without checking: a file that grew while it was copied).
func (m *Manager) release(id string, n int64) {
	b := m.budget
	if b == nil {
		return
	}
	b.mu.Lock()
	b.used = max(b.used-n, 0)
	if su := b.sessions[id]; su != nil {
		su.used = max(su.used-n, 0)
	}
	b.mu.Unlock()
}

// forgetSession drops the count of session id's artifacts, when it has no
// Session open or its artifacts were deleted: counted again when next needed.
func (m *Manager) forgetSession(id string) {
	if b := m.budget; b != nil {
		b.mu.Lock()
		delete(b.sessions, id)
		b.mu.Unlock()
	}
}

// replacedSize is the size of the artifact about to be replaced at name in dir,
// 0 if there is none.
func replacedSize(dir *os.Root, name string) int64 {
	fi, err := dir.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	return fi.Size()
}

// removeArtifacts deletes the artifacts of session id (Options.RemoveArtifacts).
func (m *Manager) removeArtifacts(id string) error {
	all, err := m.artifactsRoot()
	if err != nil {
		return err
	}
	if _, err := all.Lstat(id); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	size := int64(0)
	if m.budget != nil {
		size = m.countArtifacts(id)
	}
	err = removeTree(all, id)
	m.forgetSession(id)
	if err != nil {
		// Part of it may be gone: count again rather than guess.
		if b := m.budget; b != nil && b.limit > 0 {
			b.mu.Lock()
			b.used, b.recounted = m.countArtifacts(""), time.Now()
			b.mu.Unlock()
		}
		return fmt.Errorf("remove artifacts: %w", err)
	}
	m.release(id, size)
	return nil
}

// fullError is an artifact refused by the total budget, or by its session's
// share when session is set. It matches ErrArtifactsFull, and the latter
// ErrSessionArtifactsFull too.
type fullError struct {
	session           string
	need, used, limit int64
	whole             bool // need is more than the whole share: it never fits
}

func (e *fullError) Error() string {
	if e.whole {
		return fmt.Sprintf("%s: %d bytes, more than session %s's whole %d-byte share (its disk quota, at most half of the artifacts directory's total); not collected",
			ErrSessionArtifactsFull, e.need, e.session, e.limit)
	}
	if e.session != "" {
		return fmt.Sprintf("%s: %d bytes would take session %s's artifacts (%d bytes) over its %d-byte share (its disk quota, at most half of the artifacts directory's total); not collected",
			ErrSessionArtifactsFull, e.need, e.session, e.used, e.limit)
	}
	return fmt.Sprintf("%s: %d bytes would take the artifacts directory (%d bytes used) over its %d-byte total limit; not collected", ErrArtifactsFull,
		e.need, e.used, e.limit)
}

func (e *fullError) Is(target error) bool {
	return target == ErrArtifactsFull || (e.session != "" && target == ErrSessionArtifactsFull)
}
