package executor

import (
	"fmt"
	"strings"

	"github.com/kernelbox/kernelbox/api"
)

// validateRequest checks the request's shape (not its permissions).
func validateRequest(r *api.Request, o *Options) error {
	if !api.ValidSessionID(r.SessionID) {
		return invalidf("invalid session id %q: use %s", clip(r.SessionID, 80), api.SessionIDRule)
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
	if r.MaxWait < 0 {
		return invalidf("max wait must not be negative")
	}
	if len(r.Inputs) > o.MaxInputs {
		return invalidf("%d inputs; the limit is %d per call", len(r.Inputs), o.MaxInputs)
	}
	return nil
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", api.ErrInvalidRequest, fmt.Sprintf(format, args...))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
