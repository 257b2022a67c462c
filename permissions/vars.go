package permissions

import (
	"fmt"
	"path/filepath"
)

// Vars are the values of the variables a target pattern may start with: ${workdir},
// ${home} and ${artifacts}. Every value must be an absolute path; a pattern that
// refers to an empty or relative variable cannot be evaluated, and Evaluate then
// fails closed (see Policy.Evaluate).
type Vars struct {
	// Workdir is the working directory: ${workdir}, and the base against which
	// relative paths in a tool call are resolved.
	Workdir string

	// Home is the user's home directory, ${home}. Engine defaults it to
	// os.UserHomeDir so the built-in credential denials protect the real home
	// directory unless told otherwise.
	Home string

	// Artifacts is the shared artifacts directory, ${artifacts}.
	Artifacts string
}

// isKnownVar reports whether name is a variable that Vars can supply.
func isKnownVar(name string) bool {
	return name == "workdir" || name == "home" || name == "artifacts"
}

// lookup returns the cleaned value of the variable name.
func (v Vars) lookup(name string) (string, error) {
	var val string
	switch name {
	case "workdir":
		val = v.Workdir
	case "home":
		val = v.Home
	case "artifacts":
		val = v.Artifacts
	default:
		return "", fmt.Errorf("unknown variable ${%s}", name)
	}
	if val == "" {
		return "", fmt.Errorf("${%s} is not set", name)
	}
	if !filepath.IsAbs(val) {
		return "", fmt.Errorf("${%s} is not an absolute path: %q", name, val)
	}
	return filepath.Clean(val), nil
}

// canonical returns v with symlinks resolved in every value that exists, so that
// ${workdir}/** still matches canonical targets when the working directory is reached
// through a symlink (/tmp -> /private/tmp, a symlinked home). Values that do not
// resolve are kept as they are. Only the variables are resolved, never the rest of an
// allow pattern: see compileRules for why.
func (v Vars) canonical() Vars {
	resolve := func(p string) string {
		if p == "" || !filepath.IsAbs(p) {
			return p
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return p
	}
	return Vars{Workdir: resolve(v.Workdir), Home: resolve(v.Home), Artifacts: resolve(v.Artifacts)}
}
