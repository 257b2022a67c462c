//go:build !linux

package workspace

import "os"

// Without inotify every Collect walks outputs/.
type watcher struct{}

func (m *Manager) watcher() *watcher               { return nil }
func (w *watcher) add(s *Session, d *os.File) bool { return false }
func (w *watcher) forget(s *Session)               {}
func (w *watcher) close()                          {}
func (s *Session) unchanged() bool                 { return false }
