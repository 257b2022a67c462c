package executor

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A long traceback keeps both ends, cut between characters, with the count of what
// was cut; output keeps its end.
func TestPreloadClips(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, in, want string
	}{
		{"short", "abc", "abc"},
		{"exact", "abcde", "abcde"},
		{"cut", "abcdefghij", "ab\n[… 5 bytes cut …]\nhij"},
		{"runes", "aé€bcdé€", "a\n[… 10 bytes cut …]\n€"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			head, tl := 2, 3
			got := ends(tt.in, head, tl)
			if got != tt.want {
				t.Fatalf("ends(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("ends(%q) = %q: not UTF-8", tt.in, got)
			}
		})
	}
	if got := tail("xx€", 2); got != "…" || !utf8.ValidString(got) {
		t.Fatalf("tail = %q", got)
	}
	if got := tail(strings.Repeat("a", 10), 4); got != "…aaaa" {
		t.Fatalf("tail = %q", got)
	}
}
