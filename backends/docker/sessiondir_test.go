package docker

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
	"github.com/kernelbox/kernelbox/executor"
)

func TestCheckSpec(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	file := filepath.Join(data, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		spec executor.SessionSpec
		want string // "" for valid
	}{
		{"ok", executor.SessionSpec{Dir: "/s", Data: []executor.DataMount{{Name: "a", HostDir: data}}}, ""},
		{"relative dir", executor.SessionSpec{Dir: "s"}, "absolute"},
		{"empty name", executor.SessionSpec{Dir: "/s", Data: []executor.DataMount{{HostDir: data}}}, "single path element"},
		{"dotdot", executor.SessionSpec{Dir: "/s", Data: []executor.DataMount{{Name: "..", HostDir: data}}}, "single path element"},
		{"slash", executor.SessionSpec{Dir: "/s", Data: []executor.DataMount{{Name: "a/b", HostDir: data}}}, "single path element"},
		{"twice", executor.SessionSpec{Dir: "/s", Data: []executor.DataMount{{Name: "a", HostDir: data}, {Name: "a", HostDir: data}}}, "twice"},
		{"relative host", executor.SessionSpec{Dir: "/s", Data: []executor.DataMount{{Name: "a", HostDir: "d"}}}, "absolute"},
		{"missing host", executor.SessionSpec{Dir: "/s", Data: []executor.DataMount{{Name: "a", HostDir: data + "/nope"}}}, "no such file"},
		{"host is a file", executor.SessionSpec{Dir: "/s", Data: []executor.DataMount{{Name: "a", HostDir: file}}}, "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := checkSpec(tt.spec)
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("checkSpec = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestPrepareSessionDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	uid, gid := os.Geteuid(), os.Getegid()
	c := config{Spec: sandbox.Spec{UID: uid, GID: gid}}
	if uid == 0 {
		c = config{Spec: sandbox.Spec{UID: 1000, GID: 1000}, chown: true}
	}
	// A file inside an existing subdirectory must not be chowned.
	if err := os.Mkdir(filepath.Join(dir, "inputs"), 0o755); err != nil {
		t.Fatal(err)
	}
	staged := filepath.Join(dir, "inputs", "staged.csv")
	if err := os.WriteFile(staged, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := prepareSessionDir(c, dir, []executor.DataMount{{Name: "ref", HostDir: "/"}}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"", "inputs", "outputs", "data", "data/ref"} {
		fi, err := os.Lstat(filepath.Join(dir, d))
		if err != nil || !fi.IsDir() {
			t.Fatalf("%s: %v", d, err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != c.UID || int(st.Gid) != c.GID {
			t.Errorf("%s owned by %d:%d, want %d:%d", d, st.Uid, st.Gid, c.UID, c.GID)
		}
	}
	if c.chown {
		fi, _ := os.Lstat(staged)
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
			t.Errorf("a file inside inputs/ was chowned to %d", st.Uid)
		}
	}
}

func TestPrepareSessionDirRefusesSymlinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := t.TempDir()
	if err := os.Symlink(target, filepath.Join(dir, "outputs")); err != nil {
		t.Fatal(err)
	}
	c := config{Spec: sandbox.Spec{UID: os.Geteuid(), GID: os.Getegid()}}
	if os.Geteuid() == 0 {
		c = config{Spec: sandbox.Spec{UID: 1000, GID: 1000}, chown: true}
	}
	err := prepareSessionDir(c, dir, nil)
	if err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("prepareSessionDir with outputs/ a symlink: %v", err)
	}
	fi, _ := os.Stat(target)
	if st := fi.Sys().(*syscall.Stat_t); c.chown && st.Uid != 0 {
		t.Errorf("the symlink's target was chowned to %d", st.Uid)
	}
}
