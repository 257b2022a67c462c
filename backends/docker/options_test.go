package docker

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestResolveDefaults(t *testing.T) {
	t.Parallel()
	c, err := Options{}.resolve(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"image", c.Image, DefaultImage},
		{"ready timeout", c.readyTimeout, 60 * time.Second},
		{"lifetime", c.MaxLifetime, 24 * time.Hour},
		{"uid", c.UID, 1000},
		{"gid", c.GID, 1000},
		{"chown", c.chown, true},
		{"memory", c.Memory, int64(2 << 30)},
		{"nano cpus", c.NanoCPUs, int64(2e9)},
		{"pids", c.Pids, int64(512)},
		{"tmp", c.TmpSize, int64(512 << 20)},
		{"network", c.network, "none"},
		{"no new privileges", c.NewPrivileges, false},
		{"read-only root", c.WritableRoot, false},
		{"init", !c.NoInit, true},
		{"python", c.Python, "python3"},
		{"logger", c.log != nil, true},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

func TestResolveOverrides(t *testing.T) {
	t.Parallel()
	c, err := Options{Memory: -1, CPUs: 0.5, PidsLimit: -1, TmpSize: 1 << 20, MaxLifetime: time.Minute}.resolve(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Memory != 0 || c.NanoCPUs != 5e8 || c.Pids != 0 || c.TmpSize != 1<<20 || c.MaxLifetime != time.Minute {
		t.Errorf("resolve = %+v", c)
	}
	if c, _ := (Options{CPUs: -1}).resolve(0, 0); c.NanoCPUs != 0 {
		t.Errorf("CPUs -1: nanoCPUs = %d, want 0 (no limit)", c.NanoCPUs)
	}
}

func TestResolveRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		o    Options
		euid int
		want string
	}{
		{"root kernel", Options{User: "0:0"}, 0, "never runs as root"},
		{"not numeric", Options{User: "kernel"}, 0, "numeric"},
		{"bad gid", Options{User: "1000:x"}, 0, "numeric"},
		{"other user without root", Options{User: "2000:2000"}, 1000, "cannot hand"},
		{"bad env", Options{Env: []string{"NOVALUE"}}, 0, "KEY=VALUE"},
		{"relative socket root", Options{SocketRoot: "tmp"}, 0, "absolute"},
		{"unknown transport", Options{Transport: "tcp"}, 0, `transport "tcp"`},
		{"runtime with arguments", Options{Runtime: "runsc --debug"}, 0, "not a runtime name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.o.resolve(tt.euid, tt.euid)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("resolve error = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestKernelUser(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		user       string
		euid, egid int
		uid, gid   int
		chown      bool
	}{
		{"root default", "", 0, 0, 1000, 1000, true},
		{"root chosen", "1234:5678", 0, 0, 1234, 5678, true},
		{"user default", "", 1001, 1002, 1001, 1002, false},
		{"user explicit self", "1001:1002", 1001, 1002, 1001, 1002, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			uid, gid, chown, err := kernelUser(tt.user, tt.euid, tt.egid)
			if err != nil || uid != tt.uid || gid != tt.gid || chown != tt.chown {
				t.Errorf("kernelUser = %d, %d, %v, %v; want %d, %d, %v", uid, gid, chown, err, tt.uid, tt.gid, tt.chown)
			}
		})
	}
}

// TestTransportFor: the pinned socket for the runc family, the relay for any
// other runtime (the session's own included), and Options.Transport over both.
func TestTransportFor(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ configured, runtime, def, want string }{
		{"", "", "runc", TransportPinned},
		{"", "", "", TransportPinned},
		{"", "runc", "runsc", TransportPinned},
		{"", "crun", "runc", TransportPinned},
		{"", "runsc", "runc", TransportRelay},
		{"", "", "runsc", TransportRelay},
		{"", "kata-runtime", "runc", TransportRelay},
		{TransportRelay, "runc", "runc", TransportRelay},
		{TransportPinned, "runsc", "runc", TransportPinned},
	} {
		if got := transportFor(tt.configured, tt.runtime, tt.def); got != tt.want {
			t.Errorf("transportFor(%q, %q, %q) = %q, want %q", tt.configured, tt.runtime, tt.def, got, tt.want)
		}
	}
}

// TestGVisorRegistration: gVisor registered without the host-uds flag cannot
// reach the relay; New says so (ErrNoRuntime) instead of timing out at the first
// session, and the flag in either spelling passes.
func TestGVisorRegistration(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--fsgofer-host-uds"}, {"--platform=systrap", "--host-uds=open"}, {"-fsgofer-host-uds=true"}} {
		if why := gvisorProblem("/usr/bin/runsc", args); why != "" {
			t.Errorf("%q: %s", args, why)
		}
	}
	if gvisorProblem("/usr/bin/runsc", []string{"--network=none"}) == "" || gvisorProblem("/usr/bin/runc", nil) != "" {
		t.Error("the host-uds check")
	}
	if WarnNetwork([]string{"--network=none"}) != "" || WarnNetwork(nil) == "" {
		t.Error("the network warning")
	}
	c, err := Options{SocketRoot: t.TempDir(), Runtime: RuntimeGVisor}.resolve(os.Geteuid(), os.Getegid())
	if err != nil {
		t.Fatal(err)
	}
	_, err = newBackend(context.Background(), c, &fakeAPI{runtimes: []string{"runsc"}, images: map[string]bool{DefaultImage: true}})
	if !errors.Is(err, ErrNoRuntime) || !strings.Contains(err.Error(), "host-uds") {
		t.Errorf("New with runsc registered without host-uds: %v", err)
	}
}
