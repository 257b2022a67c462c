package keep

// The state file: its read, its writes (serialized, and none after Detach's
// last), and its lock (lock.go).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"

	"github.com/kernelbox/kernelbox/internal/statefile"
)

// Writes serializes a backend's writes of its state file: once Detach has
// written the last list, no later change (a session being torn down as the
// process ends) overwrites it. The zero value is ready.
type Writes struct {
	mu    sync.Mutex
	final bool
}

// Save runs write, one at a time, unless Final has run.
func (g *Writes) Save(write func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.final {
		write()
	}
}

// Final runs write as the last one: later Saves do nothing.
func (g *Writes) Final(write func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	write()
	g.final = true
}

// MaxBytes bounds a state file read back.
const MaxBytes = 4 << 20

// Read decodes the state file at path into st. A missing file (or no path) is no
// state: false and no error. Any other failure (unreadable, a link, over
// MaxBytes, not JSON) is an error: nothing in it may be taken back.
func Read(path string, st any) (bool, error) {
	if path == "" {
		return false, nil
	}
	b, err := statefile.Read(path, MaxBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read state file: %w", err)
	}
	if err := json.Unmarshal(b, st); err != nil {
		return false, fmt.Errorf("state file %s is corrupt: %w", path, err)
	}
	return true, nil
}

// Write stores state as JSON in path (0600, replaced atomically, synced). When it
// cannot, it logs why: the next start then cannot adopt the sessions it lists.
func Write(log *slog.Logger, path string, state any) {
	data, err := json.Marshal(state)
	if err == nil {
		err = statefile.Write(path, data, true)
	}
	if err != nil {
		log.Error("write the state file: the next start cannot adopt these sessions", "file", path, "err", err)
	}
}
