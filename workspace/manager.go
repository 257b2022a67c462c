package workspace

import (
	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/paths"

	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// sessionsRootMode is the mode of <Root>/sessions. It is the privacy boundary: no
// other host user can reach any session's files, so the directories and files
// inside may carry the wider DirMode and FileMode that a kernel running under
// another uid (docker backend) needs.
const sessionsRootMode = fs.FileMode(0o700)

// warmPrefix starts the names of placeholder session directories made by Warm.
// Valid session ids cannot start with '.', so the two never collide.
const warmPrefix = ".warm-"

// Manager owns the session directories under <Root>/sessions and the shared
// artifacts directory.
//
// A Manager is safe for concurrent use. Creating, adopting and removing session
// directories is serialized inside it, so Adopt's "target exists" check cannot race
// another Open of the same id through the same Manager.
type Manager struct {
	opts         Options
	log          *slog.Logger
	root         string // absolute Options.Root
	sessionsDir  string
	artifactsDir string
	sessions     *os.Root

	// artMu guards artifacts, the handle on ArtifactsDir, which artifactsRoot
	// replaces when the directory was removed; stale are the handles replaced,
	// closed by Close since a listing may still be using one.
	artMu     sync.Mutex
	artifacts *os.Root
	stale     []*os.Root

	// mu serializes creating, renaming and removing session directories, and
	// guards what kept.go knows of them: how many Sessions are open on each
	// (open), the closed ones kept, oldest first (kept), and the ids whose kept
	// directory was deleted since (evicted).
	mu      sync.Mutex
	open    map[string]int
	kept    []string
	evicted map[string]bool

	// private are the directories no source may lie in (open.go), guarded by
	// privMu since Protect may add to them while sessions stage.
	privMu  sync.RWMutex
	private []string

	// watch tells Collect when outputs/ is unchanged (watch.go); nil without
	// inotify.
	watchOnce sync.Once
	watch     atomic.Pointer[watcher]

	// keepMu guards keepMnt, the directories whose disks stay mounted when the
	// Manager closes (keepmounts.go), and pins, those never evicted (pinned.go).
	keepMu        sync.Mutex
	keepMnt, pins map[string]bool

	// Set by tests only. noWriterScan turns off looking for processes that hold an
	// output open for writing (writers.go), so tests can check what Collect does
	// where it cannot see them; adoptRename replaces AdoptFiles's renames, there
	// and back (adoptfiles.go; nil: renameNoReplace), so tests can make some fail.
	noWriterScan bool
	adoptRename  func(from int, name string, to int, newName string) error

	// disks are the per-session disks (disk.go); nil without DiskQuota.
	disks *disks

	// budget counts the artifacts directory against MaxArtifactsTotalBytes
	// (budget.go); nil without it.
	budget *budget
}

// New creates Root/sessions (mode 0700) and the artifacts directory (DirMode, 0755 by
// default, since it is meant to be shared) if they are missing and returns a
// Manager for them. Close releases the directory handles it holds.
func New(opts Options) (*Manager, error) {
	if opts.Root == "" {
		return nil, errors.New("workspace: Options.Root is required")
	}
	opts = withDefaults(opts)
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("workspace: root: %w", err)
	}
	artifactsDir := opts.ArtifactsDir
	if artifactsDir == "" {
		artifactsDir = filepath.Join(root, "artifacts")
	}
	if artifactsDir, err = filepath.Abs(artifactsDir); err != nil {
		return nil, fmt.Errorf("workspace: artifacts dir: %w", err)
	}
	sessionsDir := filepath.Join(root, "sessions")
	// Root and ArtifactsDir come from the operator's configuration and are trusted;
	// only what lies below sessions/<id> is the kernel's to tamper with.
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("workspace: create root: %w", err)
	}
	if err := mkdirMode(sessionsDir, sessionsRootMode, true); err != nil {
		return nil, fmt.Errorf("workspace: create sessions dir: %w", err)
	}
	if err := mkdirMode(artifactsDir, opts.DirMode, false); err != nil {
		return nil, fmt.Errorf("workspace: create artifacts dir: %w", err)
	}
	m := &Manager{
		opts:         opts,
		log:          opts.Logger,
		root:         root,
		sessionsDir:  sessionsDir,
		artifactsDir: artifactsDir,
		private:      privateDirs(append([]string{sessionsDir, artifactsDir}, opts.PrivateDirs...)...),
	}
	m.KeepMounted(opts.KeepMounted...)
	if m.sessions, err = os.OpenRoot(sessionsDir); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if m.artifacts, err = os.OpenRoot(artifactsDir); err != nil {
		m.sessions.Close()
		return nil, fmt.Errorf("workspace: %w", err)
	}
	m.emptyTrash()
	m.setupDisks()
	m.setupKept()
	m.setupBudget()
	// Options.KeepMounted is for New only: Close unmounts those disks unless
	// KeepMounted names them again (a server that keeps its sessions once more).
	m.keepMu.Lock()
	m.keepMnt = nil
	m.keepMu.Unlock()
	return m, nil
}

// mkdirMode creates dir (and its parents) if missing; force also resets the mode
// of an existing dir, which sessions/ needs to stay private.
func mkdirMode(dir string, mode fs.FileMode, force bool) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, mode); err != nil {
			return err
		}
		return os.Chmod(dir, mode)
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &fs.PathError{Op: "mkdir", Path: dir, Err: fmt.Errorf("is a %s, not a directory", kindOf(fi.Mode()))}
	}
	if force && fi.Mode().Perm() != mode {
		return os.Chmod(dir, mode)
	}
	return nil
}

// Root returns the absolute directory holding sessions/.
func (m *Manager) Root() string { return m.root }

// ArtifactsDir returns the absolute shared artifacts directory.
func (m *Manager) ArtifactsDir() string { return m.artifactsDir }

// Open creates the session directory <Root>/sessions/<id> with inputs/ and
// outputs/, or reopens it if it exists (a non-directory there is an error; an
// inputs/ or outputs/ that is not a real directory is replaced by one). id must be
// 1–64 characters of [A-Za-z0-9_-] (ErrInvalidSession); it is never sanitized.
//
// A reopened session counts the files already in inputs/ toward MaxSessionBytes,
// and its first Collect reports every file in outputs/ again.
func (m *Manager) Open(id string) (*Session, error) {
	if err := paths.CheckSessionID(id); err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	s, err := m.openSession(id, false)
	if err != nil {
		return nil, fmt.Errorf("open session %q: %w", id, err)
	}
	return s, nil
}

// Warm creates a placeholder session directory named ".warm-<random>" under
// sessions/ for a warm-pool kernel. Adopt later gives it a session id; Remove
// accepts its ID too.
func (m *Manager) Warm() (*Session, error) {
	for range 5 {
		s, err := m.openSession(warmPrefix+randomSuffix(), true)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("warm session: %w", err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("warm session: %w", fs.ErrExist)
}

// openSession creates or (unless exclusive) reopens sessions/<name>. Only the
// directory itself is made and opened under the lock; reading what inputs/ holds
// is done after it, on the session's own handle.
func (m *Manager) openSession(name string, exclusive bool) (*Session, error) {
	s, err := m.openSessionDir(name, exclusive)
	if err != nil {
		return nil, err
	}
	if err := s.init(); err != nil {
		s.Close()
		return nil, err
	}
	if s.reused {
		if s.first {
			s.sweepTemps()
		}
		s.leftover = s.baseline()
	}
	return s, nil
}

// openSessionDir makes and opens sessions/<name> under the lock.
func (m *Manager) openSessionDir(name string, exclusive bool) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions == nil {
		return nil, ErrClosed
	}
	_, err := m.sessions.Lstat(name)
	existed := err == nil
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := m.sessions.Mkdir(name, m.opts.DirMode); err != nil {
			return nil, err
		}
		if err := chmodDir(m.sessions, name, m.opts.DirMode); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	case exclusive:
		return nil, fs.ErrExist
	}
	if err := m.mountDisk(name); err != nil {
		return nil, err
	}
	root, err := openDir(m.sessions, name)
	if err != nil {
		return nil, err
	}
	s := &Session{
		m:        m,
		id:       name,
		dir:      filepath.Join(m.sessionsDir, name),
		log:      m.log.With("session", name),
		root:     root,
		staged:   map[string]int64{},
		restaged: map[string]restage{},
		seen:     map[string]fileState{},
		reused:   existed,
		first:    m.open[name] == 0,
	}
	if m.takeEvicted(name) && !existed {
		s.evicted = true
	}
	m.openedDir(name)
	return s, nil
}

// Adopt gives the warm session s the id id by renaming its directory, and returns
// the Session to use from now on; s itself is closed. A kernel already running in
// the directory keeps its working directory, because a rename keeps the inode.
// Adopt fails with ErrExists if sessions/<id> exists, and with ErrNotWarm if s
// did not come from Warm on m or was already adopted or closed.
func (m *Manager) Adopt(s *Session, id string) (*Session, error) {
	if err := paths.CheckSessionID(id); err != nil {
		return nil, fmt.Errorf("adopt warm session: %w", err)
	}
	if s == nil || s.m != m || !strings.HasPrefix(s.id, warmPrefix) || s.root == nil {
		return nil, fmt.Errorf("adopt warm session as %q: %w", id, ErrNotWarm)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions == nil {
		return nil, ErrClosed
	}
	if _, err := m.sessions.Lstat(id); err == nil {
		return nil, fmt.Errorf("adopt warm session %s as %q: %w", s.id, id, ErrExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("adopt warm session %s as %q: %w", s.id, id, err)
	}
	moved := m.disks.on() && m.mounted(s.id)
	if moved {
		if err := m.sessions.Mkdir(id, m.opts.DirMode); err != nil {
			if errors.Is(err, fs.ErrExist) {
				err = ErrExists
			}
			return nil, fmt.Errorf("adopt warm session %s as %q: %w", s.id, id, err)
		}
		if err := m.moveDisk(s.id, id); err != nil {
			_ = m.sessions.Remove(id)
			return nil, fmt.Errorf("adopt warm session %s as %q: %w", s.id, id, err)
		}
	} else if err := m.sessions.Rename(s.id, id); err != nil {
		if errors.Is(err, fs.ErrExist) {
			err = ErrExists
		}
		return nil, fmt.Errorf("adopt warm session %s as %q: %w", s.id, id, err)
	}
	if moved {
		// The handle is on the detached warm mount; the same disk is at id now.
		if root, err := openDir(m.sessions, id); err == nil {
			s.root.Close()
			s.root = root
		}
	}
	if m.open[s.id]--; m.open[s.id] <= 0 {
		delete(m.open, s.id)
	}
	m.openedDir(id)
	m.log.Debug("adopted warm session", "session", id, "warm", s.id)
	// The directory handle follows the rename, so the new Session keeps it and
	// everything s learned; only the artifacts handle, which is per id, is dropped.
	ns := &Session{
		m:        m,
		id:       id,
		dir:      filepath.Join(m.sessionsDir, id),
		log:      m.log.With("session", id),
		root:     s.root,
		staged:   s.staged,
		restaged: s.restaged,
		seen:     s.seen,
	}
	if s.art != nil {
		s.art.Close()
	}
	s.root, s.art = nil, nil
	return ns, nil
}

// Remove deletes the session directory of id (a session id or a warm ID), with
// everything in it, and its disk (Options.DiskQuota); the session's artifacts
// stay unless Options.RemoveArtifacts is set. Removing a missing session is not
// an error. Sessions still open for id stop working.
//
// Under the manager's lock the directory is only renamed out of the way (to a
// trash name below sessions/); the delete itself, which takes seconds for a
// session of a few hundred thousand files, runs after the lock is released, so
// other sessions' Opens and lookups never wait for it. An Open of id meanwhile
// makes a fresh directory. Trash left by a delete that failed or was cut short is
// removed by the next New.
func (m *Manager) Remove(id string) error {
	if !api.ValidSessionID(id) && !isWarmID(id) {
		return fmt.Errorf("remove session: %w", paths.CheckSessionID(id))
	}
	var errs []error
	if m.opts.RemoveArtifacts && api.ValidSessionID(id) {
		if err := m.removeArtifacts(id); err != nil {
			errs = append(errs, fmt.Errorf("remove session %q: %w", id, err))
		}
	}
	sessions, trash, err := m.detach(id)
	if err != nil || trash == "" {
		return errors.Join(append(errs, err)...)
	}
	if err := removeTree(sessions, trash); err != nil {
		errs = append(errs, fmt.Errorf("remove session %q: %w", id, err))
	}
	return errors.Join(errs...)
}

// trashPrefix starts the names session directories are renamed to while they
// are deleted. Like warmPrefix it cannot start a session id.
const trashPrefix = ".trash-"

// detach renames sessions/<id> to a fresh trash name and returns it ("" when
// there is no such session), with the sessions Root to delete it through.
func (m *Manager) detach(id string) (*os.Root, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions == nil {
		return nil, "", ErrClosed
	}
	m.unkeep(id)
	delete(m.evicted, id)
	return m.detachLocked(id)
}

// detachLocked is detach under m.mu.
func (m *Manager) detachLocked(id string) (*os.Root, string, error) {
	if _, err := m.sessions.Lstat(id); errors.Is(err, fs.ErrNotExist) {
		return nil, "", m.removeImage(id)
	}
	if err := m.unmountDisk(id); err != nil {
		return nil, "", fmt.Errorf("remove session %q: %w", id, err)
	}
	if err := m.removeImage(id); err != nil {
		return nil, "", fmt.Errorf("remove session %q: %w", id, err)
	}
	trash := trashPrefix + randomSuffix()
	if err := m.sessions.Rename(id, trash); err != nil {
		return nil, "", fmt.Errorf("remove session %q: %w", id, err)
	}
	return m.sessions, trash, nil
}

// emptyTrash removes what Removes that did not finish left in sessions/.
func (m *Manager) emptyTrash() {
	d, err := m.sessions.Open(".")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, name := range names {
		if strings.HasPrefix(name, trashPrefix) {
			if err := removeTree(m.sessions, name); err != nil {
				m.log.Warn("could not remove a deleted session's leftovers", "dir", name, "err", err)
			}
		}
	}
}

// isWarmID reports whether id has the shape of a name made by Warm.
func isWarmID(id string) bool {
	rest, ok := strings.CutPrefix(id, warmPrefix)
	if !ok || len(rest) != 16 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Close releases the Manager's directory handles and unmounts the session disks
// (Options.DiskQuota); their images stay, and a later Manager on the same Root
// mounts each again when its session is opened. Close the Manager's Sessions
// first: a Session of a closed Manager cannot be adopted or start writing
// artifacts.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions == nil {
		return nil
	}
	m.unmountAll()
	m.artMu.Lock()
	err := errors.Join(m.sessions.Close(), m.artifacts.Close())
	for _, r := range m.stale {
		err = errors.Join(err, r.Close())
	}
	m.sessions, m.artifacts, m.stale = nil, nil, nil
	m.artMu.Unlock()
	if w := m.watch.Load(); w != nil {
		w.close()
	}
	return err
}

// artifactsRoot returns the artifacts Root, or ErrClosed. If ArtifactsDir was
// removed or replaced since it was opened (someone cleaning up under a running
// server), it is created again as New does and reopened, so that collection goes
// on instead of failing on a deleted directory for the rest of the session.
func (m *Manager) artifactsRoot() (*os.Root, error) {
	m.artMu.Lock()
	defer m.artMu.Unlock()
	if m.artifacts == nil {
		return nil, ErrClosed
	}
	// ArtifactsDir is trusted configuration and may be a link (see New): Stat.
	now, err := os.Stat(m.artifactsDir)
	if err == nil {
		if held, err := m.artifacts.Stat("."); err == nil && os.SameFile(held, now) {
			return m.artifacts, nil
		}
	}
	if err := mkdirMode(m.artifactsDir, m.opts.DirMode, false); err != nil {
		return nil, fmt.Errorf("recreate artifacts dir: %w", err)
	}
	r, err := os.OpenRoot(m.artifactsDir)
	if err != nil {
		return nil, fmt.Errorf("reopen artifacts dir: %w", err)
	}
	m.log.Warn("artifacts dir was removed or replaced; recreated it", "dir", m.artifactsDir)
	m.stale = append(m.stale, m.artifacts)
	m.artifacts = r
	return r, nil
}
