package docker

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
)

// DefaultImage is the kernel image used when [Options.Image] is empty. It is built
// locally by kernel-image/build.sh (see [BuildImage]).
const DefaultImage = sandbox.DefaultImage

// Defaults for the zero value of [Options].
const (
	DefaultReadyTimeout = 60 * time.Second
	DefaultMaxLifetime  = sandbox.DefaultMaxLifetime
	DefaultMemory       = sandbox.DefaultMemory    // bytes; swap is limited to the same value, so none is used
	DefaultCPUs         = sandbox.DefaultCPUs      // CPUs' worth of time (NanoCPUs)
	DefaultPidsLimit    = sandbox.DefaultPidsLimit // processes and threads
	DefaultTmpSize      = sandbox.DefaultTmpSize   // bytes of tmpfs at /tmp
	DefaultNetwork      = "none"
	DefaultUnprivileged = sandbox.DefaultUser // the kernel's uid:gid when kernelbox runs as root
	DefaultPython       = sandbox.DefaultPython
)

// Options configures a [Backend]. The zero value gives the hardened defaults; each
// field says what its zero value means. Numeric limits take a negative value to remove
// the limit altogether.
type Options struct {
	// Image is the kernel image. Defaults to [DefaultImage].
	Image string

	// DockerHost is the daemon's address, for example "unix:///run/docker.sock".
	// Defaults to $DOCKER_HOST, else the local daemon's socket. The daemon must run on
	// this machine, because session and socket directories are bind-mounted by path.
	DockerHost string

	// Logger receives the backend's logs, with "session" and "container" fields.
	// Defaults to discarding them.
	Logger *slog.Logger

	// ReadyTimeout bounds how long Open waits for a container's Jupyter server to
	// answer on its socket. Defaults to 60 s (as the local backend: 24 containers
	// started at once on two cores took over 30 s each in a loaded CI run).
	ReadyTimeout time.Duration

	// MaxLifetime is the hard limit on a container's life: after it, the server is
	// stopped by `timeout` inside the container, even if kernelbox has died. Rounded up
	// to whole seconds. Defaults to 24 h.
	MaxLifetime time.Duration

	// User is the numeric "uid:gid" the kernel runs as; uid 0 is refused. Defaults to
	// kernelbox's own uid:gid, so files the kernel writes stay owned by the host user;
	// when kernelbox runs as root, defaults to "1000:1000", and the session directory
	// and its inputs/, outputs/ and data/ subdirectories (not what is in them) are
	// chowned to it. A non-root kernelbox cannot chown, so it may set only its own ids.
	User string

	// Memory is the memory limit in bytes; swap is limited to the same total, so the
	// container cannot swap. Defaults to 2 GiB.
	Memory int64

	// CPUs is the CPU limit in CPUs' worth of time. Defaults to 2.
	CPUs float64

	// PidsLimit limits processes plus threads in the container. Defaults to 512.
	PidsLimit int64

	// TmpSize is the size of the tmpfs at /tmp, which is also HOME and holds the
	// Jupyter runtime files. Defaults to 512 MiB.
	TmpSize int64

	// Network is the container's network mode. Defaults to "none" (loopback only);
	// the server is reached through its unix socket, so no network is needed.
	Network string

	// CapAdd lists capabilities added back after all are dropped. Defaults to none.
	CapAdd []string

	// AllowNewPrivileges turns off no-new-privileges, letting setuid binaries gain
	// privileges. Defaults to false.
	AllowNewPrivileges bool

	// WritableRootFS makes the container's root file system writable. Defaults to
	// false: only /tmp (a tmpfs) and /workspace are writable.
	WritableRootFS bool

	// NoInit runs the server as pid 1 instead of under Docker's init (tini), which
	// reaps zombies and forwards signals. Defaults to false.
	NoInit bool

	// Runtime is the OCI runtime, for example "runsc" for gVisor (docs/security.md,
	// "Two walls"). Defaults to the daemon's default runtime. New fails with an
	// error wrapping [ErrNoRuntime] when the daemon does not list it: a session never
	// silently runs under another runtime.
	Runtime string

	// Transport is how kernelbox reaches each container's server: [TransportPinned]
	// (the server's socket on the container's /tmp, through /proc/<pid>/root; runc
	// only) or [TransportRelay] (a relay in the container connects out to a socket
	// in its state directory; every runtime, and the only way under gVisor).
	// Defaults to pinned for the runc family (runc, crun) and relay for any other
	// runtime, the session's own (a template's) included.
	Transport string

	// Python is the interpreter inside the image that can import jupyter_server.
	// Defaults to "python3".
	Python string

	// Env lists extra "KEY=VALUE" environment entries for the container, added after
	// the backend's own (HOME, JUPYTER_*, MPLCONFIGDIR, ...), so they override them.
	Env []string

	// SocketRoot is the directory in which the backend makes its private directory of
	// per-container state directories (each server's launcher, kernelspec and token,
	// mounted read-only into its container). It is created 0700 when missing.
	// Defaults to [DefaultSocketRoot]: kernelbox's private state, never a shared
	// temporary directory.
	SocketRoot string

	// StateFile is a file private to this server (in a 0700 directory) where the
	// backend keeps what reaching its containers again takes: their ids, names,
	// sessions, state directories and servers' tokens (reattach.go). A backend
	// made with the same StateFile after this one ended (SIGKILL, or Detach)
	// re-attaches the containers listed there that still run
	// (executor.Reattacher), and no other kernelbox process reaps them. Empty
	// means none is kept: Close removes every container and the next start reaps
	// what a SIGKILL left.
	StateFile string

	// NoSharedLibraries turns off the shared Python libraries: by default each
	// image's /usr/lib/python3 and /usr/lib/python3.11 are copied once, per image
	// id, into named volumes that every session of that image mounts read-only
	// over the same paths, so that a kernel's imports do not go through the
	// engine's storage driver (fuse-overlayfs made a cold start seconds slower).
	NoSharedLibraries bool

	// EgressTestHosts, when not nil, is the egress proxy's name resolution for
	// templates with a network allowlist (egress.Options.TestHosts): a name
	// resolves to its addresses here and nowhere else. It is for tests (a test
	// internet of network namespaces); servers leave it nil.
	EgressTestHosts map[string][]netip.Addr

	// EgressLimiter, when not nil, bounds the connections of every session's
	// egress proxy together, each from its accept (egress.Limiter): a server
	// shares one between its backends so that kernels cannot take the
	// descriptors its API needs. Defaults to none: each session's max_conns
	// alone bounds its proxy.
	EgressLimiter *egress.Limiter
	// EgressUpstreamRoots, when not nil, verifies the hosts the egress proxy
	// intercepts for a template's secrets (egress.Intercept.UpstreamRoots):
	// hosts with a private CA, and a test internet's. Defaults to the system's
	// roots.
	EgressUpstreamRoots *x509.CertPool
}

// config is Options with defaults applied and values checked. The kernel's
// container is its sandbox.Spec, shared with the swarm backend.
type config struct {
	sandbox.Spec
	dockerHost   string
	log          *slog.Logger
	readyTimeout time.Duration
	chown        bool // kernelbox is root and must hand directories to uid:gid
	network      string
	runtime      string
	transport    string // "" (by runtime), TransportPinned or TransportRelay
	socketRoot   string
	stateFile    string
	noSharedLibs bool

	egressTestHosts     map[string][]netip.Addr
	egressLimiter       *egress.Limiter
	egressUpstreamRoots *x509.CertPool
	// egressForwarderOnly keeps a runc container's egress on the forwarder
	// (socat) instead of a listener in its network namespace (egressns.go):
	// a test hook for the fallback that an unprivileged kernelbox takes.
	egressForwarderOnly bool
}

// maxSocketPath is the longest socket path that works: sun_path holds 108 bytes on
// Linux and 104 on macOS, including the terminating NUL. The paths kernelbox dials
// (/proc/self/fd/N) and the server binds (containerSocket) are far shorter.
const maxSocketPath = 103

// containerSocketDir is where each container's state directory is mounted,
// read-only; containerSocket is where the server makes its socket: on the
// container's own /tmp tmpfs, which no host directory backs and which counts against
// the session's tmpfs size. The host reaches the socket through the container's root
// (pinServerSocket), never through a directory the kernel can write.
const (
	containerSocketDir = "/run/kernelbox"
	containerSocket    = "/tmp/.kernelbox-server.sock"
	// kernelSpecDir, below the socket directory, is the Jupyter data dir that holds
	// kernelbox's kernelspec.
	kernelSpecDir = "jupyter"
)

// DefaultSocketRoot is where the backend keeps its per-container state directories
// when [Options.SocketRoot] is empty, for a process running as euid: /run/kernelbox
// for root, else $XDG_RUNTIME_DIR/kernelbox, else ~/.local/share/kernelbox/run.
func DefaultSocketRoot(euid int) (string, error) {
	if euid == 0 {
		return "/run/kernelbox", nil
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "kernelbox"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("socket root: %w", err)
	}
	return filepath.Join(home, ".local", "share", "kernelbox", "run"), nil
}

// resolve applies defaults and validates o for a process running as euid:egid.
func (o Options) resolve(euid, egid int) (config, error) {
	c := config{
		Spec: sandbox.Settings{
			Image: o.Image, Python: o.Python, MaxLifetime: o.MaxLifetime,
			Memory: o.Memory, CPUs: o.CPUs, PidsLimit: o.PidsLimit, TmpSize: o.TmpSize,
		}.Spec(),
		dockerHost:   o.DockerHost,
		log:          o.Logger,
		readyTimeout: o.ReadyTimeout,
		network:      o.Network,
		runtime:      o.Runtime,
		transport:    o.Transport,
		socketRoot:   o.SocketRoot,
		stateFile:    o.StateFile,
		noSharedLibs: o.NoSharedLibraries,

		egressTestHosts:     o.EgressTestHosts,
		egressLimiter:       o.EgressLimiter,
		egressUpstreamRoots: o.EgressUpstreamRoots,
	}
	c.CapAdd = slices.Clone(o.CapAdd)
	c.NewPrivileges, c.WritableRoot, c.NoInit = o.AllowNewPrivileges, o.WritableRootFS, o.NoInit
	c.Env = slices.Clone(o.Env)
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.readyTimeout <= 0 {
		c.readyTimeout = DefaultReadyTimeout
	}
	if c.network == "" {
		c.network = DefaultNetwork
	}
	if c.socketRoot == "" {
		root, err := DefaultSocketRoot(euid)
		if err != nil {
			return config{}, err
		}
		c.socketRoot = root
	}
	var err error
	c.UID, c.GID, c.chown, err = kernelUser(o.User, euid, egid)
	if err != nil {
		return config{}, err
	}
	for _, e := range c.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return config{}, fmt.Errorf("env entry %q is not KEY=VALUE", e)
		}
	}
	switch c.transport {
	case "", TransportPinned, TransportRelay:
	default:
		return config{}, fmt.Errorf("transport %q: use %q or %q", c.transport, TransportPinned, TransportRelay)
	}
	if strings.ContainsAny(c.runtime, " \t\n\x00/") {
		return config{}, fmt.Errorf("runtime %q is not a runtime name", c.runtime)
	}
	if !filepath.IsAbs(c.socketRoot) {
		return config{}, fmt.Errorf("socket root %q is not an absolute path", c.socketRoot)
	}
	return c, nil
}

// kernelUser decides the uid:gid the kernel runs as, and whether directories must be
// chowned to it, for a kernelbox process running as euid:egid.
func kernelUser(user string, euid, egid int) (uid, gid int, chown bool, err error) {
	if user == "" {
		if euid != 0 {
			return euid, egid, false, nil
		}
		user = DefaultUnprivileged
	}
	uid, gid, err = sandbox.ParseUser(user)
	if err != nil {
		return 0, 0, false, err
	}
	if euid != 0 && (uid != euid || gid != egid) {
		return 0, 0, false, fmt.Errorf("user %q: kernelbox runs as %d:%d and cannot hand its directories to another user; run as root or leave User empty",
			user, euid, egid)
	}
	return uid, gid, euid == 0, nil
}

// withTemplate returns c with a session template's container fields applied
// (sandbox.Spec.WithTemplate).
func (c config) withTemplate(t executor.Template) config {
	c.Spec = c.WithTemplate(t)
	if t.Runtime != "" {
		c.runtime = t.Runtime
	}
	return c
}
