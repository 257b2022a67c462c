package workspace

import "path/filepath"

// KeepMounted marks session directories whose disks (DiskQuota) stay mounted
// when the Manager closes, and that New does not count as closed: the sessions
// of a server that stops with its containers kept for the next one to adopt
// (their containers still use the disks, and the next server must find the same
// mount, never a second mount of the same image). It is safe for concurrent use.
func (m *Manager) KeepMounted(ids ...string) {
	m.keepMu.Lock()
	defer m.keepMu.Unlock()
	if m.keepMnt == nil {
		m.keepMnt = make(map[string]bool)
	}
	for _, id := range ids {
		m.keepMnt[id] = true
	}
}

// keepsMount reports whether dir, a path sessions/<id>, is a directory KeepMounted
// named.
func (m *Manager) keepsMount(dir string) bool {
	if filepath.Dir(filepath.Clean(dir)) != m.sessionsDir {
		return false
	}
	m.keepMu.Lock()
	defer m.keepMu.Unlock()
	return m.keepMnt[filepath.Base(dir)]
}
