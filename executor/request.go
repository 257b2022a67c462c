package executor

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Request is one call: run Code in the session's kernel after staging Inputs.
type Request struct {
	// SessionID names the session (and so the kernel): 1 to 64 characters of
	// [A-Za-z0-9_-]. Calls with the same id share variables, imports and files.
	SessionID string `json:"session_id"`

	// Code is the Python source to run. It must not be empty or blank, and not
	// larger than Options.MaxCodeBytes.
	Code string `json:"code"`

	// Inputs are host paths to copy into the session's inputs/ directory before
	// the code runs; the code finds each at inputs/<basename>. Every path is
	// checked against the permission policy for filesystem.read.
	Inputs []string `json:"inputs,omitempty"`

	// Timeout bounds the execution. Zero means Options.DefaultTimeout; it is capped
	// at Options.MaxTimeout.
	Timeout time.Duration `json:"-"`
}

var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidSessionID reports whether id is a valid session id. Ids are validated, never
// rewritten: an id that is not valid is refused.
func ValidSessionID(id string) bool { return sessionIDPattern.MatchString(id) }

// validate checks the request's shape (not its permissions).
func (r *Request) validate(o *Options) error {
	if !ValidSessionID(r.SessionID) {
		return invalidf("invalid session id %q: use 1-64 characters of A-Z, a-z, 0-9, '_' and '-'", clip(r.SessionID, 80))
	}
	if strings.TrimSpace(r.Code) == "" {
		return invalidf("code is empty")
	}
	if len(r.Code) > o.MaxCodeBytes {
		return invalidf("code is %d bytes; the limit is %d (put large data in an input file instead)", len(r.Code), o.MaxCodeBytes)
	}
	if strings.IndexByte(r.Code, 0) >= 0 {
		return invalidf("code contains a NUL byte")
	}
	if r.Timeout < 0 {
		return invalidf("timeout must not be negative")
	}
	if len(r.Inputs) > o.MaxInputs {
		return invalidf("%d inputs; the limit is %d per call", len(r.Inputs), o.MaxInputs)
	}
	return nil
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
