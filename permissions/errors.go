package permissions

import (
	"errors"
	"strings"
)

// ErrDenied is wrapped by every error that reports a denied capability; test for it
// with errors.Is. The error itself is a *DeniedError.
var ErrDenied = errors.New("permission denied")

// DeniedError reports the denied decisions of one Engine.Check. Get it with errors.As.
type DeniedError struct {
	// Decisions are the denied decisions, in the order they were made.
	Decisions []Decision
}

// Error names each denied capability, its target and why, such as `permission
// denied: filesystem.read on /etc/shadow: denied by rule "system secrets" (builtin)`.
func (e *DeniedError) Error() string {
	parts := make([]string, len(e.Decisions))
	for i, d := range e.Decisions {
		parts[i] = d.subject() + ": " + d.Reason
	}
	return ErrDenied.Error() + ": " + strings.Join(parts, "; ")
}

// Unwrap returns ErrDenied.
func (e *DeniedError) Unwrap() error { return ErrDenied }
