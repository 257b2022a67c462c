package serverflags

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
)

// LauncherName is the file name of the server launcher script.
const LauncherName = "kernelbox_server.py"

// launcher is the Python script that starts Jupyter Server; see launcher.py.
//
//go:embed launcher.py
var launcher []byte

// WriteLauncher writes the launcher script into dir (read-only, 0444) and returns its
// path. Run it as `python3 PATH <Args(...)>` instead of `python3 -m jupyter_server`.
func WriteLauncher(dir string) (string, error) {
	p := filepath.Join(dir, LauncherName)
	if err := os.WriteFile(p, launcher, 0o444); err != nil {
		return "", fmt.Errorf("write server launcher: %w", err)
	}
	return p, nil
}

// Launcher returns the launcher script, for a server whose files are not written by
// kernelbox's host (the swarm backend ships it as a swarm config).
func Launcher() []byte { return append([]byte(nil), launcher...) }
