package swarm_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	kbclient "github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/internal/testkit/testnet"
)

// The swarm suite runs against a three-node lab of its own (scripts/swarmlab),
// brought up once by TestMain, and against kernelbox deployed as users deploy it: the
// static binary in an image with nothing else, `kernelbox serve --backend swarm` in a
// container on the manager with the manager's Docker socket mounted, its API on a unix
// socket in a bind-mounted directory that the tests' client dials.

const (
	kernelImage = "kernelbox/kernel:latest"
	serveImage  = "kernelbox/serve:test"
	serveName   = "kernelbox-serve-test"
)

// lab is the running lab, or why there is none (labWhy).
var (
	lab struct {
		dir     string // the lab directory
		bin     string // the static kernelbox binary in the serve image
		binDir  string // the temporary directory lab.bin was built in, if any
		srv     string // host dir bind-mounted at /srv in the serve container
		manager *client.Client
		kb      *kbclient.Client
		// ca is the test internet's CA (egress_test.go), made at lab start:
		// kernelbox serve verifies the hosts it intercepts with it.
		ca *testnet.CA
		// secret is the value serve's vendor template adds (secrets_test.go),
		// random per lab, in a file serve reads (srv/vendor.key).
		secret string
	}
	labWhy string
)

func TestMain(m *testing.M) {
	code := func() int {
		defer labDown()
		// A test binary stopped by a signal still tears the lab down (SIGKILL is
		// left to the lab's watchdog).
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			<-sig
			labDown()
			os.Exit(2)
		}()
		code := m.Run()
		if labStarted && labWhy == "" {
			if err := stopServe(); err != nil {
				fmt.Fprintln(os.Stderr, "swarm lab teardown:", err)
				code = 1
			}
		}
		return code
	}()
	os.Exit(code)
}

var (
	labOnce    sync.Once
	labStarted bool // labUp ran
)

// requireLab brings the lab up for the first test that needs it (the package's
// unit tests run without it), and skips or fails t when it could not start.
func requireLab(t *testing.T) {
	t.Helper()
	labOnce.Do(func() {
		labStarted = true
		if why := labUp(); why != "" {
			labWhy = why
			fmt.Fprintln(os.Stderr, "swarm lab:", why)
		}
	})
	testenv.Swarm(t, labWhy)
}

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}

// labUp brings the lab up with the kernel image on every node, builds and loads
// the serve image on the manager, and starts kernelbox there. It returns why not.
func labUp() string {
	if os.Geteuid() != 0 {
		return "needs root (network namespaces and node daemons)"
	}
	for _, c := range []string{"dockerd", "docker", "ip", "nsenter", "go"} {
		if _, err := exec.LookPath(c); err != nil {
			return c + " not found"
		}
	}
	if out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", kernelImage).CombinedOutput(); err != nil {
		return "the kernel image is missing (make image): " + strings.TrimSpace(string(out))
	}
	// The static binary builds while the nodes start and load the kernel image
	// (about a minute each on the 2-core machine; one is CPU, the other disk).
	built := make(chan error, 1)
	go func() { built <- buildServe() }()
	t0 := time.Now()
	up := exec.Command("bash", filepath.Join(repoRoot(), "scripts", "swarmlab", "up.sh"))
	up.Env = append(os.Environ(), fmt.Sprintf("SWARMLAB_OWNER=%d", os.Getpid()), "SWARMLAB_IMAGES="+kernelImage)
	var stderr bytes.Buffer
	up.Stderr = &stderr
	out, err := up.Output()
	buildErr := <-built
	if err != nil {
		return fmt.Sprintf("up.sh: %v: %s", err, stderr.String())
	}
	if buildErr != nil {
		return "serve binary: " + buildErr.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	lab.dir = lines[len(lines)-1]
	fmt.Fprintf(os.Stderr, "swarm lab %s up in %s (%s)\n", lab.dir, time.Since(t0).Round(time.Millisecond), strings.TrimSpace(stderr.String()))
	lab.manager, err = client.New(client.WithHost("unix://" + nodeSock(1)))
	if err != nil {
		return err.Error()
	}
	t1 := time.Now()
	if err := loadServeImage(); err != nil {
		return "serve image: " + err.Error()
	}
	fmt.Fprintf(os.Stderr, "swarm lab: serve image imported in %s\n", time.Since(t1).Round(time.Millisecond))
	lab.srv = filepath.Join(lab.dir, "serve")
	if err := os.MkdirAll(filepath.Join(lab.srv, "in"), 0o755); err != nil {
		return err.Error()
	}
	if err := labSecrets(); err != nil {
		return "test CA and secret: " + err.Error()
	}
	if err := startServe(); err != nil {
		return "kernelbox serve: " + err.Error()
	}
	return ""
}

func nodeSock(i int) string { return filepath.Join(lab.dir, fmt.Sprintf("n%d", i), "docker.sock") }

// node runs the docker CLI against node i.
func node(i int, args ...string) (string, error) {
	out, err := exec.Command("docker", append([]string{"-H", "unix://" + nodeSock(i)}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// buildServe builds the static kernelbox binary into lab.bin (a temporary
// directory of its own, lab.binDir, removed by labDown), or takes
// KERNELBOX_SWARM_BINARY.
func buildServe() error {
	if lab.bin = os.Getenv("KERNELBOX_SWARM_BINARY"); lab.bin != "" {
		return nil
	}
	t0 := time.Now()
	dir, err := os.MkdirTemp("", "kernelbox-swarmbin-")
	if err != nil {
		return err
	}
	lab.binDir, lab.bin = dir, filepath.Join(dir, "kernelbox")
	build := exec.Command("go", "build", "-o", lab.bin, "./cmd/kernelbox")
	build.Dir = repoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v: %s", err, out)
	}
	fmt.Fprintf(os.Stderr, "swarm lab: static kernelbox built in %s (beside the lab's start)\n", time.Since(t0).Round(time.Millisecond))
	return nil
}

// loadServeImage imports lab.bin into the manager with scripts/serve-image.sh, as
// the deployment recipe does: an image holding only the binary and the few files
// it needs, no base image, no registry.
func loadServeImage() error {
	imp := exec.Command("bash", filepath.Join(repoRoot(), "scripts", "serve-image.sh"), serveImage)
	imp.Env = append(os.Environ(), "DOCKER_HOST=unix://"+nodeSock(1), "KERNELBOX_BINARY="+lab.bin)
	if out, err := imp.CombinedOutput(); err != nil {
		return fmt.Errorf("scripts/serve-image.sh: %v: %s", err, out)
	}
	return nil
}

// startServe runs kernelbox in a container on the manager, as the deployment recipe
// does, and waits until its API answers on the bind-mounted socket.
func startServe() error {
	_, _ = node(1, "rm", "-f", serveName)
	sock := filepath.Join(lab.srv, "api.sock")
	_ = os.Remove(sock)
	if err := os.WriteFile(filepath.Join(lab.srv, "templates.json"), []byte(egressTemplates), 0o644); err != nil {
		return err
	}
	out, err := node(1, "run", "-d", "--name", serveName,
		"-v", nodeSock(1)+":/var/run/docker.sock",
		"-v", lab.srv+":/srv",
		"-e", "HOME=/tmp",
		serveImage, "serve", "--backend", "swarm",
		"--listen", "unix:/srv/api.sock", "--workspace", "/var/lib/kernelbox", "--workdir", "/srv/in",
		"--swarm-host", "unix:///var/run/docker.sock", "--memory", "512m", "--log-level", "debug",
		"--on-stop", "close", // the suite's end checks that nothing is left (swarm keeps by default)
		"--templates", "/srv/templates.json", // and the test internet's names and CA (egress_test.go)
		"--egress-test-hosts", "secure.test="+egressHost, "--egress-test-hosts", "denied.test="+egressHost,
		"--egress-test-hosts", "api.test="+authHost, "--egress-upstream-ca", "/srv/ca/ca.pem")
	if err != nil {
		return fmt.Errorf("docker run: %v: %s", err, out)
	}
	lab.kb, err = kbclient.New("unix:"+sock, nil)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := lab.kb.Health(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			logs, _ := node(1, "logs", "--tail", "20", serveName)
			return fmt.Errorf("not answering after 90 s: %v; logs:\n%s", err, logs)
		}
		if st, _ := node(1, "inspect", "-f", "{{.State.Status}}", serveName); st == "exited" {
			logs, _ := node(1, "logs", "--tail", "20", serveName)
			return fmt.Errorf("exited; logs:\n%s", logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stopServe stops kernelbox with SIGTERM (it closes its backend) and checks that no
// service, network, secret or config of kernelbox is left on the swarm.
func stopServe() error {
	if out, err := node(1, "stop", "-t", "60", serveName); err != nil {
		return fmt.Errorf("docker stop: %v: %s", err, out)
	}
	logs, _ := node(1, "logs", "--tail", "5", serveName)
	_, _ = node(1, "rm", "-f", serveName)
	left := leftovers()
	if left != "" {
		return fmt.Errorf("left after kernelbox stopped: %s\nlast logs:\n%s", left, logs)
	}
	return nil
}

// leftovers lists kernelbox's services, networks, secrets and configs on the swarm.
func leftovers() string {
	var left []string
	for _, kind := range []string{"service", "network", "secret", "config"} {
		out, err := node(1, kind, "ls", "-q", "--filter", "label=io.kernelbox.created-by=kernelbox")
		if err != nil {
			left = append(left, kind+" ls: "+err.Error())
		} else if out != "" {
			left = append(left, fmt.Sprintf("%ss: %s", kind, strings.Join(strings.Fields(out), " ")))
		}
	}
	return strings.Join(left, "; ")
}

func labDown() {
	if lab.binDir != "" {
		_ = os.RemoveAll(lab.binDir)
		lab.binDir = ""
	}
	if lab.dir == "" {
		return
	}
	_, _ = node(1, "rm", "-f", serveName)
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "scripts", "swarmlab", "down.sh"), lab.dir)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "swarm lab down:", err)
	}
	fmt.Fprintf(os.Stderr, "swarm lab down in %s\n", time.Since(t0).Round(time.Millisecond))
	lab.dir = ""
}

// TestDoctor runs `kernelbox doctor --swarm-host` on the host against the lab's
// manager: every node is ready, sets no-new-privileges and has the image.
func TestDoctor(t *testing.T) {
	requireLab(t)
	out, err := exec.Command(lab.bin, "doctor", "--swarm-host", "unix://"+nodeSock(1)).CombinedOutput()
	t.Logf("%s", out)
	require.Contains(t, string(out), "[ok  ] swarm", "err %v", err)
	require.Contains(t, string(out), "3 of 3 nodes ready")
}

// TestPublishedOnNode runs a second deployment as the README's recipe does for
// clients on other machines: its API published on its node's own address with
// `docker run -p` (not through the routing mesh), a token, and the node's name
// as an allowed Host. A client on another lab node reaches it; a request
// without the token or with another Host is refused. The second deployment's
// owner differs, so neither reaps the other's sessions.
func TestPublishedOnNode(t *testing.T) {
	requireLab(t)
	const name, token, addr = "kernelbox-serve-tcp", "lab-test-token-0123456789abcdef", "10.99.0.11:8700"
	_, _ = node(1, "rm", "-f", name)
	defer func() { _, _ = node(1, "stop", "-t", "60", name); _, _ = node(1, "rm", "-f", name) }()
	// The first deployment keeps a session meanwhile.
	res := run(t, "published-keep", "x = 41")
	require.Equal(t, "ok", string(res.Status), "%+v", res.Error)
	out, err := node(1, "run", "-d", "--name", name, "-p", "8700:8700",
		"-v", nodeSock(1)+":/var/run/docker.sock", "-e", "KERNELBOX_TOKEN="+token,
		serveImage, "serve", "--backend", "swarm", "--swarm-owner", "tcp",
		"--listen", "0.0.0.0:8700", "--allowed-host", "10.99.0.11",
		"--workspace", "/var/lib/kernelbox", "--swarm-host", "unix:///var/run/docker.sock", "--memory", "512m")
	require.NoError(t, err, out)
	ns := fmt.Sprintf("kbn2-%s", labID(t))
	// From node n2's network namespace, as a client on another machine.
	from2 := func(args ...string) (string, error) {
		out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	require.Eventually(t, func() bool {
		out, _ := from2("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://"+addr+"/healthz")
		return out == "200"
	}, 90*time.Second, 500*time.Millisecond, "the published API answers from another node")
	out, err = from2(lab.bin, "exec", "--server", "http://"+addr, "--token", token, "--session", "remote-client", "-c", "6 * 7")
	require.NoError(t, err, out)
	require.Equal(t, "42", out)
	code, _ := from2("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "http://"+addr+"/v1/sessions/x/execute", "-d", `{"code":"1"}`)
	require.Equal(t, "401", code, "no token")
	code, _ = from2("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Authorization: Bearer "+token,
		"-H", "Host: evil.example:8700", "http://"+addr+"/v1/sessions")
	require.Equal(t, "403", code, "a Host the deployment does not answer to")
	// The deployment's container is on the session's network too; a kernel that
	// finds it there is not served (the listener is on all its addresses).
	svcs, err := lab.manager.ServiceList(context.Background(), client.ServiceListOptions{Filters: make(client.Filters).Add("label", "io.kernelbox.session=remote-client")})
	require.NoError(t, err)
	require.Len(t, svcs.Items, 1)
	nw, err := lab.manager.NetworkInspect(context.Background(), svcs.Items[0].Spec.TaskTemplate.Networks[0].Target, client.NetworkInspectOptions{})
	require.NoError(t, err)
	var kbAddr string
	for _, ep := range nw.Network.Containers {
		if ep.Name == name {
			kbAddr = ep.IPv4Address.Addr().String()
		}
	}
	require.NotEmpty(t, kbAddr, "the deployment's address on the session's network: %+v", nw.Network.Containers)
	probe := fmt.Sprintf(`import socket
s = socket.create_connection((%q, 8700), timeout=5)
s.sendall(b'GET /healthz HTTP/1.0\r\nHost: 10.99.0.11\r\n\r\n')
s.settimeout(5)
try:
    print(repr(s.recv(200)))
except OSError as e:
    print(type(e).__name__)`, kbAddr)
	out, err = from2(lab.bin, "exec", "--server", "http://"+addr, "--token", token, "--session", "remote-client", "-c", probe)
	require.NoError(t, err, out)
	t.Logf("a kernel connecting to kernelbox at %s:8700 on its session's network got: %s", kbAddr, out)
	require.NotContains(t, out, "HTTP/", "kernelbox does not answer on a session's network")
	out, err = from2(lab.bin, "close", "--server", "http://"+addr, "--token", token, "remote-client")
	require.NoError(t, err, out)
	res = run(t, "published-keep", "x + 1")
	require.Equal(t, "42", res.Result, "the first deployment's session was left alone")
	require.False(t, res.StateLost)
	closeSession(t, "published-keep")
}
