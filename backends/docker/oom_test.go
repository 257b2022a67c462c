package docker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/moby/api/types/container"
)

// mountPoints builds container mount points from destination, source pairs.
func mountPoints(pairs ...string) []container.MountPoint {
	var m []container.MountPoint
	for i := 0; i+1 < len(pairs); i += 2 {
		m = append(m, container.MountPoint{Destination: pairs[i], Source: pairs[i+1]})
	}
	return m
}

func TestParseProcCgroup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, v1, v2 string
	}{
		{"v1 cgroupfs", "9:name=systemd:/docker/abc\n4:memory:/docker/abc\n3:cpuset:/docker/abc\n0::/docker/abc\n", "/docker/abc", "/docker/abc"},
		{"v1 joined controllers", "5:memory,hugetlb:/system.slice/docker-abc.scope\n", "/system.slice/docker-abc.scope", ""},
		{"v2", "0::/system.slice/docker-abc.scope\n", "", "/system.slice/docker-abc.scope"},
		{"garbage", "nonsense\n1:x\n", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v1, v2 := parseProcCgroup([]byte(tt.in))
			if v1 != tt.v1 || v2 != tt.v2 {
				t.Errorf("parseProcCgroup = %q, %q; want %q, %q", v1, v2, tt.v1, tt.v2)
			}
		})
	}
}

func TestParseOOMKills(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     uint64
		wantErr  bool
	}{
		{"v1 oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", 3, false},
		{"v2 memory.events", "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n", 2, false},
		{"old kernel", "oom_kill_disable 0\nunder_oom 0\n", 0, true},
		{"not a number", "oom_kill x\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseOOMKills([]byte(tt.in))
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("parseOOMKills = %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestReadOOMKillsFile(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "memory.events")
	if err := os.WriteFile(f, []byte("oom 1\noom_kill 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := readOOMKills(f); n != 1 || err != nil {
		t.Errorf("readOOMKills = %d, %v", n, err)
	}
	if _, err := readOOMKills(f + ".missing"); err == nil {
		t.Error("readOOMKills of a missing file succeeded")
	}
}

func TestFormatBytes(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]string{
		2 << 30:   "2.0 GiB",
		3 << 29:   "1.5 GiB",
		256 << 20: "256 MiB",
		1000:      "1000 bytes",
	} {
		if got := formatBytes(in); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", in, got, want)
		}
	}
}

// A diagnosis names whose memory limit it was: the template's, or the backend's.
func TestLimitNote(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		p    *Placement
		want string
	}{
		{&Placement{}, ""},
		{&Placement{memory: 256 << 20}, " (memory limit 256 MiB)"},
		{&Placement{memory: 256 << 20, memTmpl: true}, " at the template's memory limit (256 MiB)"},
	} {
		if got := tt.p.limitNote(); got != tt.want {
			t.Errorf("limitNote(%d, %v) = %q, want %q", tt.p.memory, tt.p.memTmpl, got, tt.want)
		}
	}
}
