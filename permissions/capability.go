package permissions

import (
	"errors"
	"fmt"
)

// Names of the capabilities kernelbox's tools declare.
const (
	// PythonExecStateful is the capability to run code in a session's long-lived
	// kernel. It has no target.
	PythonExecStateful = "python.exec.stateful"

	// FilesystemRead is the capability to read a host file or directory, here to
	// stage it into a session. Its target is the canonical path.
	FilesystemRead = "filesystem.read"

	// FilesRead is the capability to download a session's files and list its
	// directories through the files API (HTTP, MCP, the dashboard). It has no
	// target: the path is inside the session, where the workspace's path rules
	// (relative, no symbolic link, nothing outside the session), not host-path
	// rules, decide what may be reached.
	FilesRead = "files.read"

	// FilesWrite is the capability to upload files to a session and delete its
	// files through the files API. It has no target, like FilesRead. Uploading
	// is the client handing over bytes, not the server reading a host file, so
	// FilesystemRead does not apply to it.
	FilesWrite = "files.write"

	// InputsArg is the execute tool's argument that lists the host paths to stage.
	InputsArg = "inputs"
)

// ErrInvalidArgument is wrapped by Resolve's errors: a required argument is missing or
// an argument has the wrong type. It is the caller's mistake, not a denial.
var ErrInvalidArgument = errors.New("invalid argument")

// Capability is something a tool needs in order to run, declared by the tool.
// TargetArg names the call argument that holds the capability's target (a path or a
// list of paths); a capability without TargetArg has the fixed Target, or none.
type Capability struct {
	// Name is the capability, such as FilesystemRead. Rules match it with a glob.
	Name string

	// TargetArg is the argument holding the target path(s), or "" for none.
	TargetArg string

	// Target is the fixed target of a capability without TargetArg; "" for none.
	// A non-empty Target is a path and is canonicalized like an argument.
	Target string

	// Optional says that TargetArg may be absent, nil or empty, in which case the
	// capability is not needed for this call. Ignored without TargetArg.
	Optional bool
}

// ResolvedCapability is one capability needed by one call, with its target known.
type ResolvedCapability struct {
	// Name is the capability's name.
	Name string

	// Target is the canonical absolute path (symlinks resolved) that rules are
	// matched against and that a caller must use to access the file, or "" for a
	// capability without target or with a Problem.
	Target string

	// Requested is the path as the call gave it.
	Requested string

	// Problem says why Requested could not be canonicalized, or is "". A
	// capability with a Problem is always denied, with Problem as the reason.
	Problem string
}

// ExecuteCapabilities returns the capabilities of kernelbox's execute tool: running
// code statefully, and reading every path listed in its optional "inputs" argument.
// It returns a new slice on each call.
func ExecuteCapabilities() []Capability {
	return []Capability{
		{Name: PythonExecStateful},
		{Name: FilesystemRead, TargetArg: InputsArg, Optional: true},
	}
}

// FilesCapabilities returns the capabilities of a files API operation that
// reads (download, list) and/or writes (upload, delete): FilesRead, FilesWrite,
// or both, in that order. It returns a new slice on each call.
func FilesCapabilities(read, write bool) []Capability {
	var caps []Capability
	if read {
		caps = append(caps, Capability{Name: FilesRead})
	}
	if write {
		caps = append(caps, Capability{Name: FilesWrite})
	}
	return caps
}

// Resolve turns the capabilities a tool declares into the ones a call with args needs,
// in declaration order. A capability whose argument is a list (a []string, or a []any
// of strings as decoded from JSON) resolves once per item, in order; a string resolves
// once; an optional argument that is absent, nil, "" or an empty list resolves to
// nothing. Each path is canonicalized on its own with Canonical against workdir; a
// path that cannot be is returned with Problem set (and will be denied), never dropped.
//
// Resolve fails, wrapping ErrInvalidArgument, when a required argument is absent or
// nil, or an argument is neither a string nor a list of strings. A required argument
// that is an empty list needs no target and resolves to nothing.
func Resolve(caps []Capability, args map[string]any, workdir string) ([]ResolvedCapability, error) {
	var out []ResolvedCapability
	for _, c := range caps {
		if c.Name == "" {
			return nil, fmt.Errorf("resolve capability: %w: capability without a name", ErrInvalidArgument)
		}
		if c.TargetArg == "" {
			if c.Target == "" {
				out = append(out, ResolvedCapability{Name: c.Name})
			} else {
				out = append(out, resolvePath(c.Name, c.Target, workdir))
			}
			continue
		}
		paths, err := targetPaths(c, args)
		if err != nil {
			return nil, fmt.Errorf("resolve capability %s: %w", c.Name, err)
		}
		for _, p := range paths {
			out = append(out, resolvePath(c.Name, p, workdir))
		}
	}
	return out, nil
}

// targetPaths returns the paths in the argument c.TargetArg of args.
func targetPaths(c Capability, args map[string]any) ([]string, error) {
	v, ok := args[c.TargetArg]
	if !ok || v == nil {
		if c.Optional {
			return nil, nil
		}
		return nil, fmt.Errorf("argument %q: %w: required argument is missing", c.TargetArg, ErrInvalidArgument)
	}
	switch v := v.(type) {
	case string:
		if v == "" && c.Optional {
			return nil, nil
		}
		return []string{v}, nil
	case []string:
		return v, nil
	case []any:
		paths := make([]string, len(v))
		for i, item := range v {
			s, ok := item.(string)
			if !ok {
				return nil, fmt.Errorf("argument %q: %w: item %d is %s, want a path", c.TargetArg, ErrInvalidArgument, i, typeName(item))
			}
			paths[i] = s
		}
		return paths, nil
	default:
		return nil, fmt.Errorf("argument %q: %w: got %s, want a path or a list of paths", c.TargetArg, ErrInvalidArgument, typeName(v))
	}
}

// typeName names v's type in JSON terms where it came from JSON.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, float32, int, int64, int32, uint, uint64, uint32:
		return "a number"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// resolvePath canonicalizes one requested path; an empty one is a Problem.
func resolvePath(name, requested, workdir string) ResolvedCapability {
	rc := ResolvedCapability{Name: name, Requested: requested}
	target, err := Canonical(requested, workdir)
	if err != nil {
		rc.Problem = err.Error()
		return rc
	}
	rc.Target = target
	return rc
}
