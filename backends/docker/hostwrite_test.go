package docker

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kernelbox/kernelbox/executor"
)

// plantCode tries, from inside the kernel, to create a file named "planted" in
// every directory the container has mounted from outside (bind mounts, whatever
// their target, and everything below /run/kernelbox) except /workspace itself, and
// to append to every file mounted so; it first tries to make /run/kernelbox
// writable. It prints one "path:outcome" word per target, the outcome being the
// errno name or "written".
const plantCode = `
import errno, os
private = {'proc', 'sysfs', 'tmpfs', 'devpts', 'mqueue', 'cgroup', 'cgroup2', 'overlay'}
targets = set()
for l in open('/proc/self/mountinfo'):
    f = l.split()
    mp, fstype = f[4], f[f.index('-') + 1]
    if fstype not in private and mp != '/workspace':
        targets.add(mp)
for d, subdirs, _ in os.walk('/run/kernelbox'):
    targets.add(d)
try:
    os.chmod('/run/kernelbox', 0o777)
except OSError:
    pass
out = []
for t in sorted(targets):
    try:
        if os.path.isdir(t):
            open(os.path.join(t, 'planted'), 'x').close()
        else:
            open(t, 'a').close()
        out.append(t + ':written')
    except OSError as e:
        out.append(t + ':' + errno.errorcode[e.errno])
print(' '.join(out))
`

// TestKernelCannotWriteHost checks that nothing a kernel writes outside /workspace
// reaches the host: every directory or file mounted into the container besides the
// session directory refuses writes, the backend's host directories hold nothing the
// kernel made, and they live in kernelbox's private state, not in a shared /tmp.
func TestKernelCannotWriteHost(t *testing.T) {
	b, _ := newTestBackend(t, Options{})
	dataDir := t.TempDir()
	p := openPlacement(t, b, executor.SessionSpec{
		ID: "hostwrite", Dir: sessionDir(t), Data: []executor.DataMount{{Name: "ref", HostDir: dataDir}},
	})
	srv := p.Server()
	k := dialKernel(t, srv, startKernel(t, srv))

	got := strings.Fields(k.run(plantCode))
	t.Logf("writes tried from the kernel: %s", strings.Join(got, " "))
	var sawRun bool
	for _, w := range got {
		path, outcome, _ := strings.Cut(w, ":")
		sawRun = sawRun || path == "/run/kernelbox"
		if outcome != "EACCES" && outcome != "EROFS" {
			t.Errorf("kernel writing in %s: %s, want EACCES or EROFS", path, outcome)
		}
	}
	if !sawRun || len(got) < 2 {
		t.Errorf("targets tried: %q; want /run/kernelbox and the data mount at least", got)
	}

	for _, root := range []string{b.sockRoot, dataDir} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Name() == "planted" {
				t.Errorf("the kernel's file is on the host: %s", path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	tmp := filepath.Clean(os.TempDir()) + string(filepath.Separator)
	if strings.HasPrefix(filepath.Clean(b.sockRoot)+string(filepath.Separator), tmp) {
		t.Errorf("socket root %s is under the shared temporary directory %s", b.sockRoot, tmp)
	}
	fi, err := os.Stat(filepath.Dir(b.sockRoot))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("%s has mode %s, want no group or other access", filepath.Dir(b.sockRoot), fi.Mode().Perm())
	}
}

// TestSocketPinned checks that a kernel replacing the server's socket with its own
// listener does not redirect kernelbox: the host keeps talking to the real server.
func TestSocketPinned(t *testing.T) {
	b, _ := newTestBackend(t, Options{})
	p := openPlacement(t, b, executor.SessionSpec{ID: "pinned", Dir: sessionDir(t)})
	srv := p.Server()
	k := dialKernel(t, srv, startKernel(t, srv))
	got := k.run(`
import os, socket
os.unlink('` + containerSocket + `')
impostor = socket.socket(socket.AF_UNIX)
impostor.bind('` + containerSocket + `')
impostor.listen()
print('replaced')`)
	if got != "replaced\n" {
		t.Fatalf("replacing the socket printed %q", got)
	}
	var api struct{ Version string }
	if code := restCall(t, srv, http.MethodGet, "/api", nil, &api); code != http.StatusOK || api.Version == "" {
		t.Fatalf("GET /api after the kernel replaced the socket: %d %+v", code, api)
	}
	k2 := dialKernel(t, srv, startKernel(t, srv))
	if got := k2.run("print(6 * 7)"); got != "42\n" {
		t.Errorf("a new kernel after the swap printed %q", got)
	}
}

// TestDaemonMemory checks that the daemon's memory is read, and that it is this
// machine's (the daemon must run here): within a few percent of /proc/meminfo.
func TestDaemonMemory(t *testing.T) {
	requireDocker(t)
	got, err := DaemonMemory(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	var kb int64
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	host := kb << 10
	if got < host*9/10 || got > host*11/10 {
		t.Errorf("DaemonMemory = %d, host MemTotal %d", got, host)
	}
}
