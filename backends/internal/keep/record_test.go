package keep

import (
	"strings"
	"testing"
)

// TestRecordChecks: each check takes the good shape and refuses the others,
// saying what is wrong.
func TestRecordChecks(t *testing.T) {
	t.Parallel()
	if err := CheckVersion("f.json", 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := CheckVersion("f.json", 2, 1); err == nil || !strings.Contains(err.Error(), "f.json has format 2, this kernelbox reads 1") {
		t.Fatalf("another version: %v", err)
	}
	if err := CheckSession("s-1"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", "../x", "a b", strings.Repeat("s", 1000)} {
		if err := CheckSession(s); err == nil || !strings.Contains(err.Error(), "is not a session id") {
			t.Errorf("session %q: %v", s, err)
		}
	}
	good := strings.Repeat("0123456789abcdef", 4)
	if !ValidToken(good) {
		t.Fatal("a good token refused")
	}
	for _, s := range []string{"", good[:63], good + "0", strings.ToUpper(good), good[:63] + "g", good[:63] + "\n"} {
		if ValidToken(s) {
			t.Errorf("token %q taken", s)
		}
	}
}
