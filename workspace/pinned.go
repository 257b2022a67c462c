package workspace

// Pin marks closed session directories that must be kept whatever
// Options.MaxKeptSessions says: hibernated sessions, whose directories hold
// their snapshots, and sessions restored from a checkpoint after a restart. A
// pinned directory is not counted among the kept closed ones and never evicted to
// make room for another (issue 46 item 6); the executor bounds how many there are
// (its MaxHibernated) and refuses past that, told. Unpin ends it: the next close
// keeps the directory as any other. It is safe for concurrent use.
func (m *Manager) Pin(ids ...string) {
	m.keepMu.Lock()
	if m.pins == nil {
		m.pins = make(map[string]bool)
	}
	for _, id := range ids {
		m.pins[id] = true
	}
	m.keepMu.Unlock()
	// A pinned directory that is kept closed now stops counting.
	m.mu.Lock()
	for _, id := range ids {
		m.unkeep(id)
	}
	m.mu.Unlock()
}

// Unpin undoes Pin for id.
func (m *Manager) Unpin(id string) {
	m.keepMu.Lock()
	defer m.keepMu.Unlock()
	delete(m.pins, id)
}

// pinned reports whether Pin named session directory name.
func (m *Manager) pinned(name string) bool {
	m.keepMu.Lock()
	defer m.keepMu.Unlock()
	return m.pins[name]
}
