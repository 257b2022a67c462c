package swarm

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
)

// Defaults for the zero value of [Options].
const (
	DefaultImage         = sandbox.DefaultImage
	DefaultOwner         = "kernelbox"
	DefaultReadyTimeout  = 90 * time.Second
	DefaultMaxLifetime   = sandbox.DefaultMaxLifetime
	DefaultMemory        = sandbox.DefaultMemory // bytes
	DefaultCPUs          = sandbox.DefaultCPUs
	DefaultPidsLimit     = sandbox.DefaultPidsLimit
	DefaultTmpSize       = sandbox.DefaultTmpSize // bytes of tmpfs at /tmp
	DefaultWorkspaceSize = 1 << 30                // bytes of tmpfs at /workspace (the session's files)
	DefaultReserveMemory = 128 << 20              // bytes the scheduler reserves per session
	DefaultReserveCPUs   = 0.05
	DefaultUser          = sandbox.DefaultUser
	DefaultPython        = sandbox.DefaultPython
)

// serverPort is the TCP port of each task's Jupyter Server, on its overlay address.
const serverPort = 8888

// Options configures a [Backend]. The zero value gives the hardened defaults; each
// field says what its zero value means. Numeric limits take a negative value to
// remove the limit.
type Options struct {
	// DockerHost is a swarm manager's daemon, for example "unix:///var/run/docker.sock"
	// (kernelbox runs in a container on the manager with the socket mounted).
	// Defaults to $DOCKER_HOST, else the local daemon's socket.
	DockerHost string

	// Self is the name or id of the container kernelbox runs in, on DockerHost's
	// daemon: it is attached to each session's network, since a host process cannot
	// join an overlay network. Defaults to this process's hostname, which Docker sets
	// to the container's short id.
	Self string

	// Owner names this kernelbox deployment in the labels of everything it creates.
	// At start, services, networks, secrets and configs of another (dead) instance
	// with the same Owner are removed: run one kernelbox per Owner on a swarm.
	// Defaults to "kernelbox".
	Owner string

	// Image is the kernel image; it must be present on every node (no registry is
	// asked: the service is created without resolving the image). Defaults to
	// [DefaultImage].
	Image string

	// Constraints are swarm placement constraints for the sessions' services, for
	// example "node.labels.kernels==yes". Defaults to none: any node.
	Constraints []string

	// User is the numeric "uid:gid" the kernel runs as; uid 0 is refused. Defaults
	// to "1000:1000".
	User string

	// Memory, CPUs and PidsLimit limit each session's task. Default 2 GiB, 2 CPUs,
	// 512 processes and threads.
	Memory    int64
	CPUs      float64
	PidsLimit int64

	// ReserveMemory and ReserveCPUs are what the scheduler reserves per session on
	// its node, so that sessions spread and a full node takes no more. Default
	// 128 MiB and 0.05 CPUs.
	ReserveMemory int64
	ReserveCPUs   float64

	// TmpSize and WorkspaceSize size the tmpfs at /tmp (HOME, Jupyter's runtime
	// files) and at /workspace (the session's files). Default 512 MiB and 1 GiB.
	TmpSize       int64
	WorkspaceSize int64

	// ReadyTimeout bounds how long Open waits for the task to run and its server to
	// answer (a node may have to start the image first). Defaults to 90 s.
	ReadyTimeout time.Duration

	// MaxStarting is how many sessions may be starting at once, from their
	// network's creation until their kernel answers (executor.StartLimiter); the
	// executor holds further starts back. A burst of sessions then comes up in
	// turn, the first ones in seconds, instead of all sharing the nodes' CPUs
	// until all are late together. Defaults to two per node that is ready and
	// active when the backend starts (at least 4); negative means no limit.
	MaxStarting int

	// MaxLifetime is the hard limit on a task's life, enforced by `timeout` inside
	// it even when kernelbox is gone. Defaults to 24 h.
	MaxLifetime time.Duration

	// Python is the interpreter in the image that can import jupyter_server.
	// Defaults to "python3".
	Python string

	// StateFile is a file private to this server (in a 0700 directory) where the
	// backend keeps what reaching its sessions' services again takes: each
	// service's id, name, network and secret, its task's overlay address and its
	// server's token, and the backend's instance and configs (keep.go). A backend
	// made with the same StateFile and Owner after this one ended (SIGKILL, or
	// Detach) takes back the services listed there that still run
	// (executor.Reattacher) instead of reaping them. Empty means none is kept:
	// Close removes every service and the next start reaps what a SIGKILL left.
	StateFile string

	// EgressTestHosts, when not nil, is the egress proxy's name resolution for
	// templates with a network allowlist (egress.Options.TestHosts): a name
	// resolves to its addresses here and no other name resolves. It is for tests
	// only (a test internet the tests make); servers leave it nil.
	EgressTestHosts map[string][]netip.Addr

	// EgressLimiter, when not nil, bounds the connections of every session's
	// egress proxy together, each from its accept (egress.Limiter). Defaults to
	// none: each session's max_conns alone bounds its proxy.
	EgressLimiter *egress.Limiter

	// EgressUpstreamRoots, when not nil, verifies the hosts the egress proxy
	// intercepts for a template's secrets (egress.Intercept.UpstreamRoots):
	// for hosts with a private CA, and tests. Defaults to the system's roots.
	EgressUpstreamRoots *x509.CertPool

	// Logger receives the backend's logs. Defaults to discarding them.
	Logger *slog.Logger
}

// config is Options with defaults applied and values checked. The kernel's
// task is its sandbox.Spec, shared with the docker backend; a template's
// variables are its Env (withTemplate).
type config struct {
	sandbox.Spec
	host, self, owner         string
	stateFile                 string
	constraints               []string
	reserveMemory, reserveCPU int64
	workSize                  int64
	readyTimeout              time.Duration
	maxStarting               int // 0: two per ready node, set by New; <0: no limit
	egressTestHosts           map[string][]netip.Addr
	egressLimiter             *egress.Limiter
	egressUpstreamRoots       *x509.CertPool
	log                       *slog.Logger
}

// Limits returns one session's image and service limits from o, defaults
// applied and a negative (off) limit as 0: what `kernelbox serve --backend swarm`
// shows and caps templates with (the container settings docker shares).
func (o Options) Limits() executor.Limits {
	return sandbox.Settings{
		Image: o.Image, MaxLifetime: o.MaxLifetime, Memory: o.Memory, CPUs: o.CPUs, PidsLimit: o.PidsLimit,
	}.Limits()
}

func (o Options) resolve() (config, error) {
	c := config{
		Spec: sandbox.Settings{
			Image: o.Image, Python: o.Python, MaxLifetime: o.MaxLifetime,
			Memory: o.Memory, CPUs: o.CPUs, PidsLimit: o.PidsLimit, TmpSize: o.TmpSize,
		}.Spec(),
		host: o.DockerHost, self: o.Self, owner: o.Owner,
		constraints:  slices.Clone(o.Constraints),
		readyTimeout: o.ReadyTimeout, log: o.Logger,
		maxStarting: o.MaxStarting, stateFile: o.StateFile,
		egressTestHosts: o.EgressTestHosts, egressLimiter: o.EgressLimiter, egressUpstreamRoots: o.EgressUpstreamRoots,
	}
	if c.self == "" {
		h, err := os.Hostname()
		if err != nil {
			return config{}, fmt.Errorf("self container: %w", err)
		}
		c.self = h
	}
	if c.owner == "" {
		c.owner = DefaultOwner
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.readyTimeout <= 0 {
		c.readyTimeout = DefaultReadyTimeout
	}
	c.workSize = sandbox.Limit(o.WorkspaceSize, DefaultWorkspaceSize)
	c.reserveMemory = sandbox.Limit(o.ReserveMemory, DefaultReserveMemory)
	c.reserveCPU = sandbox.NanoCPUs(o.ReserveCPUs, DefaultReserveCPUs)
	if !validLabelValue(c.owner) {
		return config{}, fmt.Errorf("owner %q: use letters, digits, '.', '_' or '-' (at most 63)", c.owner)
	}
	user := o.User
	if user == "" {
		user = DefaultUser
	}
	var err error
	if c.UID, c.GID, err = sandbox.ParseUser(user); err != nil {
		return config{}, err
	}
	return c, nil
}

// withTemplate returns c with a session template's task fields applied
// (sandbox.Spec.WithTemplate).
func (c config) withTemplate(t executor.Template) config {
	c.Spec = c.WithTemplate(t)
	return c
}

func validLabelValue(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
