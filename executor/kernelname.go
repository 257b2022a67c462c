package executor

import "fmt"

// maxKernelName bounds a kernel name; Jupyter's own names are a few bytes.
const maxKernelName = 64

// CheckKernelName reports whether name can be a session's kernel
// (SessionSpec.Template.Kernel, Options.Kernel): empty (the backend's Python kernel), or a
// kernelspec name as Jupyter writes them, ASCII letters, digits, ".", "_" and "-",
// at most 64 bytes, and not "." or "..". A kernelspec name is a directory name on
// the server, so anything else (a "/", say) is refused here, before any server
// sees it. The error wraps ErrKernelUnavailable.
func CheckKernelName(name string) error {
	if len(name) > maxKernelName {
		return fmt.Errorf("%w: kernel name of %d bytes (at most %d)", ErrKernelUnavailable, len(name), maxKernelName)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: kernel name %q", ErrKernelUnavailable, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return fmt.Errorf("%w: kernel name %q: only ASCII letters, digits, '.', '_' and '-' (as Jupyter's kernelspec names)", ErrKernelUnavailable, name)
		}
	}
	return nil
}
