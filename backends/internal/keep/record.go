package keep

import (
	"fmt"
	"regexp"

	"github.com/kernelbox/kernelbox/api"
)

// The checks every backend makes of its state file and its records, so that a
// tampered file cannot steer a backend to another session: each backend adds
// the checks of its own fields.

// CheckVersion refuses the state file at path when its format version, got, is
// not want, the one this kernelbox writes.
func CheckVersion(path string, got, want int) error {
	if got != want {
		return fmt.Errorf("state file %s has format %d, this kernelbox reads %d", path, got, want)
	}
	return nil
}

// CheckSession refuses a record whose session is not a session id.
func CheckSession(session string) error {
	if !api.ValidSessionID(session) {
		return fmt.Errorf("session %q is not a session id", session)
	}
	return nil
}

var tokenRe = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ValidToken reports whether s has the shape of a server token a backend drew:
// 64 lowercase hex digits.
func ValidToken(s string) bool { return tokenRe.MatchString(s) }
