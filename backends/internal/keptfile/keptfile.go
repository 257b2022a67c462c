// Package keptfile is the one rule for a backend's kept-state file (docker.json,
// swarm.json): writes are serialized, and once Detach has written the last list no
// later change (a session being torn down as the process ends) overwrites it.
package keptfile

import "sync"

// Gate serializes a backend's writes of its state file. The zero value is ready.
type Gate struct {
	mu    sync.Mutex
	final bool
}

// Save runs write, one at a time, unless Final has run.
func (g *Gate) Save(write func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.final {
		write()
	}
}

// Final runs write as the last one: later Saves do nothing.
func (g *Gate) Final(write func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	write()
	g.final = true
}
