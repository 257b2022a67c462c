package docker

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/serverflags"
)

// openPlacement opens a placement and closes it when the test ends.
func openPlacement(t testing.TB, b *Backend, spec executor.SessionSpec) *Placement {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := b.Open(ctx, spec)
	t.Cleanup(func() {
		if p != nil {
			if err := p.Close(context.Background()); err != nil {
				t.Errorf("close placement: %v", err)
			}
		}
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return p.(*Placement)
}

// kernelUID is the uid the tests expect the kernel to run as.
func kernelUID() int {
	if os.Geteuid() == 0 {
		return 1000
	}
	return os.Geteuid()
}

func TestSandbox(t *testing.T) {
	b, _ := newTestBackend(t, Options{})
	dataDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dataDir, "d.csv"), []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := sessionDir(t)

	t0 := time.Now()
	p := openPlacement(t, b, executor.SessionSpec{
		ID: "sandbox", Dir: dir, Data: []executor.DataMount{{Name: "ref", HostDir: dataDir}},
	})
	ready := time.Since(t0)
	srv := p.Server()
	if srv.KernelPath != "" || srv.Endpoint.Socket == "" || srv.Endpoint.Token == "" {
		t.Fatalf("server = %+v", srv)
	}
	if len(srv.Endpoint.Socket) > maxSocketPath {
		t.Errorf("socket path %q is %d bytes", srv.Endpoint.Socket, len(srv.Endpoint.Socket))
	}

	var api struct{ Version string }
	if code := restCall(t, srv, http.MethodGet, "/api", nil, &api); code != http.StatusOK || api.Version == "" {
		t.Fatalf("GET /api: %d %+v", code, api)
	}
	t1 := time.Now()
	k := dialKernel(t, srv, startKernel(t, srv))
	if got := k.run("print(1 + 1)"); got != "2\n" {
		t.Fatalf("1 + 1 printed %q", got)
	}
	first := time.Since(t1)
	t.Logf("cold start: Open -> socket ready %v; kernel start -> first result %v; total %v",
		ready.Round(time.Millisecond), first.Round(time.Millisecond), (ready + first).Round(time.Millisecond))

	checks := []struct {
		name, code, want string
	}{
		{"only loopback", "import os; print(sorted(os.listdir('/sys/class/net')))", "['lo']\n"},
		{"no capabilities", "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0])", "0000000000000000\n"},
		{"no new privileges", "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('NoNewPrivs')][0])", "1\n"},
		{"read-only root", `
import errno
try:
    open('/usr/x', 'w')
    print('writable')
except OSError as e:
    print(errno.errorcode[e.errno])`, "EROFS\n"},
		{"uid", "import os; print(os.getuid(), os.getuid() != 0)", strconv.Itoa(kernelUID()) + " True\n"},
		{"cwd", "import os; print(os.getcwd())", "/workspace\n"},
		{"home on tmpfs", "import os; print(os.environ['HOME'], os.access('/tmp', os.W_OK))", "/tmp True\n"},
		{"data readable", "print(open('data/ref/d.csv').read().splitlines()[1])", "1,2\n"},
		{"data read-only", `
import errno
try:
    open('data/ref/new', 'w')
    print('writable')
except OSError as e:
    print(errno.errorcode[e.errno])`, "EROFS\n"},
		{"mounts under /workspace", `
mps = sorted(l.split()[4] for l in open('/proc/self/mountinfo') if l.split()[4].startswith('/workspace'))
print(mps)`, "['/workspace', '/workspace/data/ref']\n"},
		{"network refused", `
import socket
try:
    socket.create_connection(('1.1.1.1', 53), timeout=2)
    print('connected')
except OSError as e:
    print('refused')`, "refused\n"},
		{"tmp is exec", "print('noexec' in [l.split()[5] for l in open('/proc/self/mountinfo') if l.split()[4] == '/tmp'][0].split(','))", "False\n"},
		{"write output", "open('outputs/x.txt', 'w').write('hello'); print('ok')", "ok\n"},
	}
	// The kernel cannot redirect kernelbox's connections by swapping the socket:
	// its directory is read-only, and the server's own socket is pinned.
	checks = append(checks, struct{ name, code, want string }{"state dir read-only", `
import errno, os
def try_(f):
    try:
        f()
        return 'done'
    except OSError as e:
        return errno.errorcode[e.errno]
print(try_(lambda: os.unlink('/run/kernelbox/` + serverflags.LauncherName + `')),
      try_(lambda: os.rename('/run/kernelbox/config', '/run/kernelbox/old')),
      try_(lambda: os.symlink('/etc/passwd', '/run/kernelbox/j.sock')),
      try_(lambda: os.chmod('/run/kernelbox', 0o777)))`, "EROFS EROFS EROFS EROFS\n"})
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if got := k.run(c.code); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}

	fi, err := os.Stat(filepath.Join(dir, "outputs", "x.txt"))
	if err != nil {
		t.Fatalf("output file on the host: %v", err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != kernelUID() {
		t.Errorf("outputs/x.txt owned by uid %d, want %d", st.Uid, kernelUID())
	}

	// A warm-pool member's directory is renamed when it is taken; the bind mount
	// follows the directory, not the path.
	renamed := dir + "-renamed"
	if err := os.Rename(dir, renamed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(renamed) })
	k.run("open('outputs/y.txt', 'w').write('after rename')")
	if _, err := os.Stat(filepath.Join(renamed, "outputs", "y.txt")); err != nil {
		t.Errorf("write after renaming the session dir: %v", err)
	}

	if d := p.Diagnose(context.Background()); d != "" {
		t.Errorf("Diagnose on a healthy container = %q, want empty", d)
	}
	if err := b.Health(context.Background()); err != nil {
		t.Errorf("Health: %v", err)
	}
}

func TestContainerHardening(t *testing.T) {
	b, api := newTestBackend(t, Options{})
	p := openPlacement(t, b, executor.SessionSpec{ID: "hardening", Dir: sessionDir(t)})
	r, err := api.ContainerInspect(context.Background(), p.ContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, hc := r.Container.Config, r.Container.HostConfig
	checks := []struct {
		name      string
		got, want any
	}{
		{"user", c.User, "1000:1000"},
		{"network", string(hc.NetworkMode), "none"},
		{"cap drop", strings.Join(hc.CapDrop, ","), "ALL"},
		{"security opt", strings.Join(hc.SecurityOpt, ","), "no-new-privileges:true"},
		{"read-only root", hc.ReadonlyRootfs, true},
		{"init", hc.Init != nil && *hc.Init, true},
		{"memory", hc.Memory, int64(2 << 30)},
		{"memory+swap", hc.MemorySwap, int64(2 << 30)},
		{"cpus", hc.NanoCPUs, int64(2e9)},
		{"pids", hc.PidsLimit != nil && *hc.PidsLimit == 512, true},
		{"tmpfs", hc.Tmpfs["/tmp"], "rw,exec,nosuid,nodev,mode=1777,size=536870912"},
		{"workdir", c.WorkingDir, "/workspace"},
		{"entrypoint", strings.Join(c.Entrypoint[:4], " "), "timeout -k 10 86400"},
		{"no cmd", len(c.Cmd), 0},
		{"label created-by", c.Labels[LabelCreatedBy], "kernelbox"},
		{"label session", c.Labels[LabelSession], "hardening"},
		{"label instance", c.Labels[LabelInstance], b.instance},
		{"label owner", c.Labels[LabelOwner], strconv.Itoa(os.Getpid()) + ":" + b.owner.start},
		{"state", r.Container.State.Running, true},
	}
	if os.Geteuid() != 0 {
		checks[0].want = strconv.Itoa(os.Geteuid()) + ":" + strconv.Itoa(os.Getegid())
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

func TestSessionsAreIsolated(t *testing.T) {
	b, _ := newTestBackend(t, Options{})
	dirA, dirB := sessionDir(t), sessionDir(t)
	pa := openPlacement(t, b, executor.SessionSpec{ID: "a", Dir: dirA})
	pb := openPlacement(t, b, executor.SessionSpec{ID: "b", Dir: dirB})
	if pa.Server().Endpoint.Socket == pb.Server().Endpoint.Socket || pa.Server().Endpoint.Token == pb.Server().Endpoint.Token {
		t.Fatal("two sessions share a socket or a token")
	}
	ka := dialKernel(t, pa.Server(), startKernel(t, pa.Server()))
	kb := dialKernel(t, pb.Server(), startKernel(t, pb.Server()))
	ka.run("open('outputs/secret-a.txt', 'w').write('a')")
	kb.run("open('outputs/secret-b.txt', 'w').write('b')")

	list := `
import os
found = []
for root, dirs, files in os.walk('/workspace'):
    found += files
print(sorted(found))`
	if got := ka.run(list); got != "['secret-a.txt']\n" {
		t.Errorf("session a sees %s", got)
	}
	if got := kb.run(list); got != "['secret-b.txt']\n" {
		t.Errorf("session b sees %s", got)
	}
	// Nothing of the host or the other session is mounted: only the session dir, the
	// socket dir, /tmp and Docker's own files.
	mounts := `
print(sorted(l.split()[4] for l in open('/proc/self/mountinfo')
             if l.split()[4].startswith(('/workspace', '/run', '/tmp', '/home', '/mnt', '/srv'))))`
	want := "['/run/kernelbox', '/tmp', '/workspace']\n"
	if got := ka.run(mounts); got != want {
		t.Errorf("session a mounts %s, want %s", got, want)
	}
	if _, err := os.Stat(filepath.Join(dirB, "outputs", "secret-a.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("session a's file showed up in session b's dir: %v", err)
	}
}

func TestCloseRemovesEverything(t *testing.T) {
	api := requireDocker(t)
	b, err := New(context.Background(), Options{Logger: testLogger(t)})
	t.Cleanup(func() {
		if b != nil {
			_ = b.Close(context.Background())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	label := LabelInstance + "=" + b.instance
	p1, err := b.Open(context.Background(), executor.SessionSpec{ID: "c1", Dir: sessionDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(context.Background(), executor.SessionSpec{ID: "c2", Dir: sessionDir(t)}); err != nil {
		t.Fatal(err)
	}
	if n := countContainers(t, api, label); n != 2 {
		t.Fatalf("%d containers after two Opens, want 2", n)
	}
	if err := p1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p1.Close(context.Background()); err != nil {
		t.Fatalf("second Placement.Close: %v", err)
	}
	if n := countContainers(t, api, label); n != 1 {
		t.Fatalf("%d containers after closing one placement, want 1", n)
	}

	// Close works even when the caller's context is already done.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Close(done); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := countContainers(t, api, label); n != 0 {
		t.Fatalf("%d containers after Close, want 0", n)
	}
	if _, err := os.Stat(b.sockRoot); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket root still there after Close: %v", err)
	}
	if _, err := b.Open(context.Background(), executor.SessionSpec{ID: "late", Dir: sessionDir(t)}); !errors.Is(err, ErrClosed) {
		t.Errorf("Open after Close: %v, want ErrClosed", err)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestCloseAbortsOpenInFlight(t *testing.T) {
	api := requireDocker(t)
	b, err := New(context.Background(), Options{Logger: testLogger(t)})
	t.Cleanup(func() {
		if b != nil {
			_ = b.Close(context.Background())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	dir := sessionDir(t)
	go func() {
		_, err := b.Open(context.Background(), executor.SessionSpec{ID: "inflight", Dir: dir})
		errc <- err
	}()
	// Close once the container exists, while Open still waits for the server.
	deadline := time.Now().Add(10 * time.Second)
	for countContainers(t, api, LabelInstance+"="+b.instance) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	err = <-errc
	// Open may have finished just before Close; either way nothing is left.
	if err != nil && !errors.Is(err, ErrClosed) {
		t.Errorf("Open during Close: %v, want nil or ErrClosed", err)
	}
	if n := countContainers(t, api, LabelInstance+"="+b.instance); n != 0 {
		t.Errorf("%d containers after Close, want 0", n)
	}
}

// deadPID returns the pid of a process that has exited.
func deadPID(t testing.TB) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func TestNewReapsOrphans(t *testing.T) {
	api := requireDocker(t)
	self, err := currentOwner()
	if err != nil {
		t.Fatal(err)
	}
	testID := "reap-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	create := func(name string, o owner) string {
		t.Helper()
		labels := o.labels()
		labels[LabelCreatedBy] = sandbox.CreatedBy
		labels[LabelInstance] = testID
		labels[LabelSession] = name
		init := true
		r, err := api.ContainerCreate(context.Background(), client.ContainerCreateOptions{
			Name: "kernelbox-test-" + testID + "-" + name,
			Config: &container.Config{
				Image: DefaultImage, Entrypoint: []string{"sleep", "300"}, Labels: labels, User: "1000:1000",
			},
			HostConfig: &container.HostConfig{NetworkMode: "none", Init: &init},
		})
		t.Cleanup(func() {
			_, _ = api.ContainerRemove(context.Background(), r.ID, client.ContainerRemoveOptions{Force: true})
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := api.ContainerStart(context.Background(), r.ID, client.ContainerStartOptions{}); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	dead := self
	dead.pid = deadPID(t)
	reused := self
	reused.start = "1" // this pid, but not this process: the pid was reused
	rebooted := self
	rebooted.boot = "00000000-0000-0000-0000-000000000000"
	elsewhere := dead
	elsewhere.host = self.host + "-elsewhere"

	create("dead", dead)
	create("reused", reused)
	create("rebooted", rebooted)
	create("alive", self)
	create("elsewhere", elsewhere)

	newTestBackend(t, Options{})

	ctx := context.Background()
	list, err := api.ContainerList(ctx, client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", LabelInstance+"="+testID),
	})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, c := range list.Items {
		left = append(left, c.Labels[LabelSession])
	}
	if strings.Join(left, ",") != "alive,elsewhere" && strings.Join(left, ",") != "elsewhere,alive" {
		t.Errorf("containers left after reaping: %v, want alive and elsewhere", left)
	}
}

func TestDiagnoseAfterKill(t *testing.T) {
	b, api := newTestBackend(t, Options{})
	p := openPlacement(t, b, executor.SessionSpec{ID: "killed", Dir: sessionDir(t)})
	ctx := context.Background()
	if _, err := api.ContainerKill(ctx, p.ContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	wait := api.ContainerWait(ctx, p.ContainerID(), client.ContainerWaitOptions{})
	select {
	case <-wait.Result:
	case err := <-wait.Error:
		t.Fatal(err)
	}
	if got, want := p.Diagnose(ctx), "container exited with code 137"; got != want {
		t.Errorf("Diagnose = %q, want %q", got, want)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := p.Diagnose(ctx); !strings.Contains(got, "gone") {
		t.Errorf("Diagnose after Close = %q, want it to say the container is gone", got)
	}
}

func TestDiagnoseOOM(t *testing.T) {
	const limit = 256 << 20
	b, api := newTestBackend(t, Options{Memory: limit})
	p := openPlacement(t, b, executor.SessionSpec{ID: "oom", Dir: sessionDir(t)})
	srv := p.Server()
	k := dialKernel(t, srv, startKernel(t, srv))
	k.run("x = 1")

	r := k.execute("b = bytearray(4 << 30)", 60*time.Second)
	if !r.Died {
		t.Fatalf("allocating 4 GiB under a 256 MiB limit: %+v, want the kernel to die", r)
	}
	ctx := context.Background()
	got := p.Diagnose(ctx)
	if want := "kernel was OOM-killed (memory limit 256 MiB)"; got != want {
		t.Errorf("Diagnose = %q, want %q", got, want)
	}
	if again := p.Diagnose(ctx); again != "" {
		t.Errorf("second Diagnose = %q, want empty (each kill is reported once)", again)
	}
	ins, err := api.ContainerInspect(ctx, p.ContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	source := "cgroup " + p.oomFile
	if p.oomFile == "" {
		source = "docker events"
	}
	p.mu.Unlock()
	t.Logf("after the kernel's OOM kill: container running=%v, State.OOMKilled=%v; detected through %s",
		ins.Container.State.Running, ins.Container.State.OOMKilled, source)

	// The fallback, for when the cgroup file cannot be read: the daemon's events.
	p.mu.Lock()
	p.oomFile = ""
	p.mu.Unlock()
	k = dialKernel(t, srv, startKernel(t, srv))
	if r := k.execute("b = bytearray(4 << 30)", 60*time.Second); !r.Died {
		t.Fatalf("second allocation: %+v, want the kernel to die", r)
	}
	if got, want := p.Diagnose(ctx), "kernel was OOM-killed (memory limit 256 MiB)"; got != want {
		t.Errorf("Diagnose from docker events = %q, want %q", got, want)
	}

	// Once the container is gone, Docker's OOMKilled flag (set at exit for any
	// earlier kill) says it too.
	if _, err := api.ContainerKill(ctx, p.ContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	wait := api.ContainerWait(ctx, p.ContainerID(), client.ContainerWaitOptions{})
	select {
	case <-wait.Result:
	case err := <-wait.Error:
		t.Fatal(err)
	}
	if got, want := p.Diagnose(ctx), "container exited with code 137, OOM-killed (memory limit 256 MiB)"; got != want {
		t.Errorf("Diagnose after exit = %q, want %q", got, want)
	}
}

func TestMaxLifetime(t *testing.T) {
	// Long enough for the server to be ready first on a loaded machine: with 3 s,
	// a CI-like load (load average 7 on 2 cores) had the container stop before
	// its server answered.
	b, api := newTestBackend(t, Options{MaxLifetime: 10 * time.Second})
	p := openPlacement(t, b, executor.SessionSpec{ID: "short-lived", Dir: sessionDir(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wait := api.ContainerWait(ctx, p.ContainerID(), client.ContainerWaitOptions{})
	select {
	case r := <-wait.Result:
		t.Logf("container stopped itself with code %d", r.StatusCode)
	case err := <-wait.Error:
		t.Fatalf("the container did not stop at its max lifetime: %v", err)
	}
	if got, want := p.Diagnose(ctx), "container exited with code 124, max lifetime of 10s reached"; got != want {
		t.Errorf("Diagnose = %q, want %q", got, want)
	}
}

func TestOpenFailureReportsLogs(t *testing.T) {
	b, api := newTestBackend(t, Options{Python: "/nonexistent/python3"})
	_, err := b.Open(context.Background(), executor.SessionSpec{ID: "broken", Dir: sessionDir(t)})
	var se *StartError
	if !errors.As(err, &se) {
		t.Fatalf("Open with a missing interpreter: %v, want a *StartError", err)
	}
	if se.Running || se.ExitCode != 127 || !errors.Is(err, errExited) {
		t.Errorf("StartError = %+v, want exit code 127", se)
	}
	if !strings.Contains(strings.Join(se.Logs, "\n"), "nonexistent") {
		t.Errorf("logs %q do not name the missing interpreter", se.Logs)
	}
	t.Logf("the error reads: %v", err)
	if n := countContainers(t, api, LabelInstance+"="+b.instance); n != 0 {
		t.Errorf("%d containers left after a failed Open", n)
	}
}

func TestOpenReadyTimeout(t *testing.T) {
	b, api := newTestBackend(t, Options{ReadyTimeout: time.Millisecond})
	_, err := b.Open(context.Background(), executor.SessionSpec{ID: "slow", Dir: sessionDir(t)})
	var se *StartError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "not ready after") {
		t.Fatalf("Open with a 1 ms ready timeout: %v, want a timeout StartError", err)
	}
	if n := countContainers(t, api, LabelInstance+"="+b.instance); n != 0 {
		t.Errorf("%d containers left after a failed Open", n)
	}
}

func TestMissingImage(t *testing.T) {
	requireDocker(t)
	_, err := New(context.Background(), Options{Image: "kernelbox/no-such-image:none"})
	if !errors.Is(err, ErrNoImage) || !strings.Contains(err.Error(), "kernelbox image build") {
		t.Fatalf("New with a missing image: %v, want ErrNoImage with build instructions", err)
	}
	ok, err := ImageExists(context.Background(), "kernelbox/no-such-image:none")
	if ok || err != nil {
		t.Errorf("ImageExists(missing) = %v, %v", ok, err)
	}
	ok, err = ImageExists(context.Background(), "")
	if !ok || err != nil {
		t.Errorf("ImageExists(default) = %v, %v", ok, err)
	}
}

func TestBuildImageReuses(t *testing.T) {
	requireDocker(t)
	if os.Geteuid() != 0 {
		t.Skip("build.sh needs root")
	}
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := BuildImage(ctx, "", false, &out, &out); err != nil {
		t.Fatalf("BuildImage: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "reusing") {
		t.Errorf("BuildImage on a built image said %q, want it to reuse the image", out.String())
	}
}
