package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/paths"
)

// checkSpec validates a session spec before anything is created for it.
func checkSpec(spec executor.SessionSpec) error {
	if !filepath.IsAbs(spec.Dir) {
		return fmt.Errorf("session dir %q is not an absolute path", spec.Dir)
	}
	seen := make(map[string]bool, len(spec.Data))
	for _, d := range spec.Data {
		if err := paths.CheckName(d.Name, paths.Plain); err != nil {
			return fmt.Errorf("data mount: want a single path element: %w", err)
		}
		if seen[d.Name] {
			return fmt.Errorf("data mount name %q is used twice", d.Name)
		}
		seen[d.Name] = true
		if !filepath.IsAbs(d.HostDir) {
			return fmt.Errorf("data mount %q: host dir %q is not an absolute path", d.Name, d.HostDir)
		}
		fi, err := os.Stat(d.HostDir)
		if err != nil {
			return fmt.Errorf("data mount %q: %w", d.Name, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("data mount %q: %s is not a directory", d.Name, d.HostDir)
		}
	}
	return nil
}

// prepareSessionDir readies a session directory for its container: the directory,
// its inputs/ and outputs/, and for data mounts data/ and the data/<Name> mountpoints
// must be real directories (they are created when missing; a symlink in their place is
// an error, never followed). The mountpoints are made here, not by Docker, because
// Docker would make them root-owned. When kernelbox runs as root, each of these
// directories - and nothing below them - is chowned to the kernel's uid:gid.
func prepareSessionDir(c config, dir string, data []executor.DataMount) error {
	dirs := []string{dir, filepath.Join(dir, "inputs"), filepath.Join(dir, "outputs")}
	if len(data) > 0 {
		dirs = append(dirs, filepath.Join(dir, "data"))
		for _, d := range data {
			dirs = append(dirs, filepath.Join(dir, "data", d.Name))
		}
	}
	for i, d := range dirs {
		if err := ensureDir(d, i > 0); err != nil {
			return err
		}
		if c.chown {
			if err := os.Lchown(d, c.UID, c.GID); err != nil {
				return fmt.Errorf("hand session dir to the kernel user: %w", err)
			}
		}
	}
	return nil
}

// ensureDir checks that path is a directory and not a symlink, creating it when
// missing and create is true.
func ensureDir(path string, create bool) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := os.Mkdir(path, 0o755); err != nil {
			return fmt.Errorf("session dir: %w", err)
		}
		fi, err = os.Lstat(path)
	}
	if err != nil {
		return fmt.Errorf("session dir: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir() {
		return fmt.Errorf("session dir: %s is not a directory (%s)", path, fi.Mode().Type())
	}
	return nil
}

var _ executor.SessionDirer = (*Placement)(nil)

// KernelDir implements executor.SessionDirer: the session directory is bind-mounted
// at /workspace in the container, whatever its host path.
func (p *Placement) KernelDir(string) string { return sandbox.Workspace }
