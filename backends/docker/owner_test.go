package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"testing"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	// Field 22 is the start time; the command may hold spaces and parentheses.
	rest := "S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 20 21"
	tests := []struct {
		name, stat, start, state string
		wantErr                  bool
	}{
		{"plain", "123 (kernelbox) " + rest, "424242", "S", false},
		{"spaces and parens", "123 (my (odd) cmd) ) " + rest, "424242", "S", false},
		{"zombie", "123 (x) Z" + rest[1:], "424242", "Z", false},
		{"no paren", "123 kernelbox " + rest, "", "", true},
		{"short", "123 (x) S 1 2", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start, state, err := parseStat([]byte(tt.stat))
			if (err != nil) != tt.wantErr || start != tt.start || state != tt.state {
				t.Errorf("parseStat = %q, %q, %v; want %q, %q, error %v", start, state, err, tt.start, tt.state, tt.wantErr)
			}
		})
	}
}

func TestProcStartSelf(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	start, state, err := procStart(os.Getpid())
	if err != nil || start == "" || state == "Z" {
		t.Fatalf("procStart(self) = %q, %q, %v", start, state, err)
	}
	if _, _, err := procStart(1 << 30); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("procStart(no such pid) error = %v, want fs.ErrNotExist", err)
	}
}

func TestJudge(t *testing.T) {
	t.Parallel()
	self := owner{host: "h", boot: "b", pid: 10, start: "100"}
	procs := map[int][2]string{ // pid -> start, state
		10: {"100", "S"},
		11: {"555", "S"},
		12: {"200", "Z"},
	}
	fake := func(pid int) (string, string, error) {
		p, ok := procs[pid]
		if !ok {
			return "", "", fmt.Errorf("process %d: %w", pid, fs.ErrNotExist)
		}
		return p[0], p[1], nil
	}
	tests := []struct {
		name string
		o    owner
		gone bool
	}{
		{"self", self, false},
		{"alive other", owner{host: "h", boot: "b", pid: 11, start: "555"}, false},
		{"dead pid", owner{host: "h", boot: "b", pid: 99, start: "1"}, true},
		{"pid reused", owner{host: "h", boot: "b", pid: 11, start: "1"}, true},
		{"zombie", owner{host: "h", boot: "b", pid: 12, start: "200"}, true},
		{"other boot", owner{host: "h", boot: "old", pid: 10, start: "100"}, true},
		{"other host", owner{host: "other", boot: "x", pid: 99, start: "1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gone, why := judge(tt.o, self, fake)
			if gone != tt.gone || why == "" {
				t.Errorf("judge = %v (%s), want %v", gone, why, tt.gone)
			}
		})
	}
	failing := func(int) (string, string, error) { return "", "", fs.ErrPermission }
	if gone, _ := judge(owner{host: "h", boot: "b", pid: 11, start: "1"}, self, failing); gone {
		t.Error("judge reaps when it cannot read the process")
	}
}

func TestOwnerLabelsRoundTrip(t *testing.T) {
	t.Parallel()
	o := owner{host: "h", boot: "b", pid: 42, start: "12345"}
	got, err := ownerFromLabels(o.labels())
	if err != nil || got != o {
		t.Fatalf("ownerFromLabels(labels(%+v)) = %+v, %v", o, got, err)
	}
	for _, l := range []map[string]string{
		{},
		{LabelOwner: "42", LabelBoot: "b", LabelHost: "h"},
		{LabelOwner: "x:1", LabelBoot: "b", LabelHost: "h"},
		{LabelOwner: "42:1", LabelHost: "h"},
		{LabelOwner: "42:1", LabelBoot: "b"},
		{LabelOwner: "-1:1", LabelBoot: "b", LabelHost: "h"},
	} {
		if _, err := ownerFromLabels(l); err == nil {
			t.Errorf("ownerFromLabels(%v) accepted incomplete labels", l)
		}
	}
}

func TestCurrentOwner(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/sys/kernel/random/boot_id"); err != nil {
		t.Skip("no /proc")
	}
	o, err := currentOwner()
	if err != nil {
		t.Fatal(err)
	}
	if o.pid != os.Getpid() || o.boot == "" || o.host == "" || o.start == "" {
		t.Errorf("currentOwner = %+v", o)
	}
	if _, err := strconv.ParseUint(o.start, 10, 64); err != nil {
		t.Errorf("start time %q is not a number", o.start)
	}
	if gone, why := judge(o, o, procStart); gone {
		t.Errorf("judge(self) = gone: %s", why)
	}
}

func TestRemoveOrphanSocketDir(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	parent := root + "/" + socketRootPrefix + "123"
	good := parent + "/0123abcd"
	odd := root + "/other/0123abcd"
	for _, d := range []string{good, odd} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	removeOrphanSocketDir(mountPoints(containerSocketDir, good, containerSocketDir, odd, "/workspace", root))
	if _, err := os.Stat(parent); !os.IsNotExist(err) {
		t.Errorf("socket dir's parent not removed: %v", err)
	}
	if _, err := os.Stat(odd); err != nil {
		t.Errorf("a dir of another shape was removed: %v", err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Errorf("a non-socket mount was removed: %v", err)
	}
}
