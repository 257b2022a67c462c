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

// budget holds the artifacts directory to Options.MaxArtifactsTotalBytes. The
// count is taken by walking the directory when the Manager starts and kept up by
// every write and removal through the Manager; a refusal walks again (at most
// every recountEvery) so that space freed by hand is seen.
//
// Artifacts are refused, never evicted: an agent may still be reading any
// artifact it was told about, and what to delete is the operator's call.
type budget struct {
	limit int64

	mu        sync.Mutex
	used      int64
	recounted time.Time
}

// setupBudget counts the artifacts directory when a total limit is set.
func (m *Manager) setupBudget() {
	if m.opts.MaxArtifactsTotalBytes <= 0 {
		return
	}
	m.budget = &budget{limit: m.opts.MaxArtifactsTotalBytes, used: m.countArtifacts(""), recounted: time.Now()}
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
	if b == nil {
		return 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.limit
}

// reserve counts n more bytes against the budget, or fails with ErrArtifactsFull
// when they do not fit.
func (m *Manager) reserve(n int64) error {
	b := m.budget
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit && time.Since(b.recounted) >= recountEvery {
		b.used, b.recounted = m.countArtifacts(""), time.Now()
	}
	if b.used+n > b.limit {
		return &fullError{need: n, used: b.used, limit: b.limit}
	}
	b.used += n
	return nil
}

// release gives n bytes back (negative n takes more without checking: a file
// that grew while it was copied).
func (m *Manager) release(n int64) {
	b := m.budget
	if b == nil {
		return
	}
	b.mu.Lock()
	b.used = max(b.used-n, 0)
	b.mu.Unlock()
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
	if err != nil {
		// Part of it may be gone: count again rather than guess.
		if b := m.budget; b != nil {
			b.mu.Lock()
			b.used, b.recounted = m.countArtifacts(""), time.Now()
			b.mu.Unlock()
		}
		return fmt.Errorf("remove artifacts: %w", err)
	}
	m.release(size)
	return nil
}

// fullError is an artifact refused by the total budget. It matches
// ErrArtifactsFull.
type fullError struct {
	need, used, limit int64
}

func (e *fullError) Error() string {
	return fmt.Sprintf("%s: %d bytes would take the artifacts directory (%d bytes used) over its %d-byte total limit; not collected", ErrArtifactsFull,
		e.need, e.used, e.limit)
}

func (e *fullError) Is(target error) bool { return target == ErrArtifactsFull }
