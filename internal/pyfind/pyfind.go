// Package pyfind finds a Python interpreter that can run Jupyter Server and ipykernel.
// The first python3 on PATH is often a pyenv or venv build without them, while the
// distribution's /usr/bin/python3 has them, so the search tries several in order and
// checks each by importing the modules.
package pyfind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Candidates are tried, in order, when neither an explicit interpreter nor
// KERNELBOX_PYTHON is given.
var Candidates = []string{"/usr/bin/python3", "python3"}

// ErrNotFound is returned when no candidate can import jupyter_server and ipykernel.
var ErrNotFound = errors.New("no Python with jupyter_server and ipykernel found")

// Find returns the interpreter to use: explicit if non-empty (which must work), else
// $KERNELBOX_PYTHON if set (which must work), else the first working candidate.
func Find(explicit string) (string, error) {
	cands := Candidates
	switch {
	case explicit != "":
		cands = []string{explicit}
	case os.Getenv("KERNELBOX_PYTHON") != "":
		cands = []string{os.Getenv("KERNELBOX_PYTHON")}
	}
	var tried []string
	for _, c := range cands {
		path, err := exec.LookPath(c)
		if err != nil {
			tried = append(tried, c+": not found")
			continue
		}
		if why := Check(path); why != "" {
			tried = append(tried, path+": "+why)
			continue
		}
		return path, nil
	}
	return "", fmt.Errorf("%w (tried %s); install them with `bash scripts/setup.sh` (Debian: apt-get install python3-jupyter-server python3-ipykernel) or point KERNELBOX_PYTHON / --python at an interpreter that has them",
		ErrNotFound, strings.Join(tried, "; "))
}

// Check returns "" when python can import jupyter_server and ipykernel, or a short
// reason why not.
func Check(python string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-c", "import jupyter_server, ipykernel").CombinedOutput()
	if err == nil {
		return ""
	}
	s := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		s = err.Error()
	}
	return s
}
