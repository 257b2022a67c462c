package capacity

import (
	"strings"
	"testing"
)

const gib = 1 << 30

func TestMake(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		in         Input
		reserve    int64
		sessionMem int64
		sessions   int
		over       bool
	}{
		// The machine of issue 21: 23 GiB; 2 GiB sessions.
		{"defaults on 23 GiB", Input{Memory: 23 * gib, DefaultSessionMemory: 2 * gib}, 23 * gib / 100 * 10, 2 * gib, 10, false},
		{"reserve is at least 1 GiB", Input{Memory: 4 * gib, DefaultSessionMemory: 2 * gib}, gib, 2 * gib, 1, false},
		{"small host: the session gets the budget", Input{Memory: 2 * gib, DefaultSessionMemory: 2 * gib}, gib, gib, 1, false},
		{"tiny host: half is kept back", Input{Memory: gib / 2, DefaultSessionMemory: 2 * gib}, gib / 4, gib / 4, 1, false},
		{"big host: capped", Input{Memory: 1024 * gib, DefaultSessionMemory: 2 * gib}, 1024 * gib / 100 * 10, 2 * gib, MaxSessions, false},
		{"memory flag only", Input{Memory: 23 * gib, SessionMemory: gib / 2, DefaultSessionMemory: 2 * gib}, 23 * gib / 100 * 10, gib / 2, 41, false},
		{"sessions flag that fits", Input{Memory: 23 * gib, DefaultSessionMemory: 2 * gib, MaxSessions: 8}, 23 * gib / 100 * 10, 2 * gib, 8, false},
		{"flags that overcommit", Input{Memory: 23 * gib, SessionMemory: 2 * gib, MaxSessions: 61}, 23 * gib / 100 * 10, 2 * gib, 61, true},
		{"sessions flag overcommits the default", Input{Memory: 23 * gib, DefaultSessionMemory: 2 * gib, MaxSessions: 20}, 23 * gib / 100 * 10, 2 * gib, 20, true},
		{"memory unknown", Input{DefaultSessionMemory: 2 * gib}, 0, 2 * gib, 0, false},
		{"unlimited sessions' memory", Input{Memory: 23 * gib, SessionMemory: -1, MaxSessions: 100}, 23 * gib / 100 * 10, -1, 100, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := Make(tt.in)
			if p.Reserve != tt.reserve || p.SessionMemory != tt.sessionMem || p.MaxSessions != tt.sessions || p.Overcommitted() != tt.over {
				t.Errorf("Make(%+v) = %+v (overcommitted %v); want reserve %d, session memory %d, %d sessions, overcommitted %v",
					tt.in, p, p.Overcommitted(), tt.reserve, tt.sessionMem, tt.sessions, tt.over)
			}
			if p.Memory > 0 && p.Budget != p.Memory-p.Reserve {
				t.Errorf("budget %d, want memory - reserve = %d", p.Budget, p.Memory-p.Reserve)
			}
			if p.MaxSessionsDerived && p.Overcommitted() {
				t.Errorf("a derived plan overcommits: %s", p)
			}
			if (p.Warning("--memory", "--max-sessions") != "") != tt.over {
				t.Errorf("Warning = %q, want one only when overcommitted", p.Warning("--memory", "--max-sessions"))
			}
		})
	}
}

func TestWarningNamesFigures(t *testing.T) {
	t.Parallel()
	w := Make(Input{Memory: 23 * gib, SessionMemory: 2 * gib, MaxSessions: 61}).Warning("--memory", "--max-sessions")
	for _, want := range []string{"--max-sessions 61", "--memory 2.0 GiB", "122.0 GiB promised", "20.7 GiB budget", "23.0 GiB of memory", "2.3 GiB reserve", "use --max-sessions 10"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning %q lacks %q", w, want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1024", 1024, true},
		{"512m", 512 << 20, true},
		{"2g", 2 * gib, true},
		{"2G", 2 * gib, true},
		{"2GiB", 2 * gib, true},
		{"1.5gb", 3 * gib / 2, true},
		{"64k", 64 << 10, true},
		{"", 0, false},
		{"g", 0, false},
		{"-1g", 0, false},
		{"2x", 0, false},
		{"two", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
