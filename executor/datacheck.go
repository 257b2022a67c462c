package executor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/paths"
	"github.com/kernelbox/kernelbox/permissions"
)

// maxDeniedShown bounds the denied entries a data mount's error lists.
const maxDeniedShown = 10

// checkDataFiles refuses a data mount whose directory (dir, canonical, as the
// policy allowed it) holds an entry that the policy denies as an input, such as
// a .env file or an SSH key (issue 33 item 5): the kernel would read through
// data/ what it may not stage. Every entry is judged by its path, as an input
// would be (a denied directory is not entered; a symbolic link is judged by its
// own name, never followed). The mount is refused, naming each entry and its
// rule (the first maxDeniedShown of them), rather than the entries left out:
// a bind mount (docker) cannot leave a file out, and a mount that shows the
// kernel the same files on every backend, or fails loudly at start, is easier
// to trust than one that is quietly thinner than its directory. A directory
// that cannot be read through is refused too (fail closed).
func checkDataFiles(perm *permissions.Engine, d DataMount, dir string) error {
	eval := perm.Evaluator(permissions.FilesystemRead)
	var denied []permissions.Decision
	n := 0
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		dec := eval(p)
		if dec.Effect != permissions.Deny {
			return nil
		}
		n++
		if len(denied) < maxDeniedShown {
			denied = append(denied, dec)
		}
		if e.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("data mount %q: check its files against the permission policy: %w", d.Name, err)
	}
	if n == 0 {
		return nil
	}
	shown := ""
	if n > len(denied) {
		shown = fmt.Sprintf(" (the first %d listed)", len(denied))
	}
	return fmt.Errorf("data mount %q: %s holds %d %s that the permission policy denies as inputs%s, which the kernel would read through data/%s; move them out of the directory (a built-in credential name may instead be allowed by a policy rule naming its exact path): %w",
		d.Name, dir, n, plural(n, "entry", "entries"), shown, d.Name, &permissions.DeniedError{Decisions: denied})
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// recheckData checks the data mounts of a session's template again as the
// session gets a kernel (issue 47 item 2): the check when the executor was
// built saw the directories as they were then, and a directory that gained a
// .env or an SSH key since would show it to every new session (a bind mount
// shows it to live docker sessions at once: docs/permissions.md). A mount that
// now holds what the policy denies refuses the kernel, the error naming each
// entry and its rule; the session stays without one until the directory is
// clean. It walks each directory whole, as at start.
func (e *Executor) recheckData(t *Template) error {
	data := e.dataOf(t)
	if len(data) == 0 {
		return nil
	}
	if err := checkData(e.perm, data, map[string]bool{}); err != nil {
		if errors.Is(err, permissions.ErrDenied) {
			err = fmt.Errorf("%w: %w", api.ErrDenied, err) // the API's 403, as for a denied input
		}
		return fmt.Errorf("data mounts are checked again as each session's kernel starts: %w", err)
	}
	return nil
}

// checkData validates the data mounts and checks each against the permission
// policy: its directory, and every entry below it (checkDataFiles) unless
// checked holds the directory already; it adds those it checks.
func checkData(perm *permissions.Engine, data []DataMount, checked map[string]bool) error {
	seen := map[string]bool{}
	for _, d := range data {
		if err := paths.CheckName(d.Name, paths.Plain); err != nil {
			return fmt.Errorf("data mount: the name must be a plain directory name: %w", err)
		}
		if seen[d.Name] {
			return fmt.Errorf("data mount %q: the name is used twice", d.Name)
		}
		seen[d.Name] = true
		caps := []permissions.Capability{{Name: permissions.FilesystemRead, TargetArg: "dir"}}
		rep, err := perm.Check(context.Background(), caps, map[string]any{"dir": d.HostDir})
		if err != nil {
			return fmt.Errorf("data mount %q: %w", d.Name, err)
		}
		for _, rc := range rep.Allowed(permissions.FilesystemRead) {
			if checked[rc.Target] {
				continue
			}
			if err := checkDataFiles(perm, d, rc.Target); err != nil { // datacheck.go
				return err
			}
			checked[rc.Target] = true
		}
	}
	return nil
}
