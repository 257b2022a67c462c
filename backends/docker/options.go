package docker

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/executor"
)

// DefaultImage is the kernel image used when [Options.Image] is empty. It is built
// locally by kernel-image/build.sh (see [BuildImage]).
const DefaultImage = "kernelbox/kernel:latest"

// Defaults for the zero value of [Options].
const (
	DefaultReadyTimeout = 60 * time.Second
	DefaultMaxLifetime  = 24 * time.Hour
	DefaultMemory       = 2 << 30   // bytes; swap is limited to the same value, so none is used
	DefaultCPUs         = 2.0       // CPUs' worth of time (NanoCPUs)
	DefaultPidsLimit    = 512       // processes and threads
	DefaultTmpSize      = 512 << 20 // bytes of tmpfs at /tmp
	DefaultNetwork      = "none"
	DefaultUnprivileged = "1000:1000" // the kernel's uid:gid when kernelbox runs as root
	DefaultPython       = "python3"
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

	// Runtime is the OCI runtime, for example "runsc" for gVisor. Defaults to the
	// daemon's default runtime.
	Runtime string

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
}

// config is Options with defaults applied and values checked.
type config struct {
	image        string
	dockerHost   string
	log          *slog.Logger
	readyTimeout time.Duration
	lifetime     time.Duration
	uid, gid     int
	chown        bool // kernelbox is root and must hand directories to uid:gid
	memory       int64
	nanoCPUs     int64
	pidsLimit    int64
	tmpSize      int64
	network      string
	capAdd       []string
	newPrivs     bool
	writableRoot bool
	init         bool
	runtime      string
	python       string
	env          []string
	socketRoot   string
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
	workspaceDir  = "/workspace"
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
		image:        o.Image,
		dockerHost:   o.DockerHost,
		log:          o.Logger,
		readyTimeout: o.ReadyTimeout,
		lifetime:     o.MaxLifetime,
		network:      o.Network,
		capAdd:       append([]string(nil), o.CapAdd...),
		newPrivs:     o.AllowNewPrivileges,
		writableRoot: o.WritableRootFS,
		init:         !o.NoInit,
		runtime:      o.Runtime,
		python:       o.Python,
		env:          append([]string(nil), o.Env...),
		socketRoot:   o.SocketRoot,
	}
	if c.image == "" {
		c.image = DefaultImage
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.readyTimeout <= 0 {
		c.readyTimeout = DefaultReadyTimeout
	}
	if c.lifetime <= 0 {
		c.lifetime = DefaultMaxLifetime
	}
	if c.network == "" {
		c.network = DefaultNetwork
	}
	if c.python == "" {
		c.python = DefaultPython
	}
	if c.socketRoot == "" {
		root, err := DefaultSocketRoot(euid)
		if err != nil {
			return config{}, err
		}
		c.socketRoot = root
	}
	c.memory = limit(o.Memory, DefaultMemory)
	c.pidsLimit = limit(o.PidsLimit, DefaultPidsLimit)
	c.tmpSize = limit(o.TmpSize, DefaultTmpSize)
	switch {
	case o.CPUs == 0:
		c.nanoCPUs = int64(DefaultCPUs * 1e9)
	case o.CPUs > 0:
		c.nanoCPUs = int64(o.CPUs * 1e9)
	}

	var err error
	c.uid, c.gid, c.chown, err = kernelUser(o.User, euid, egid)
	if err != nil {
		return config{}, err
	}
	for _, e := range c.env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return config{}, fmt.Errorf("env entry %q is not KEY=VALUE", e)
		}
	}
	if !filepath.IsAbs(c.socketRoot) {
		return config{}, fmt.Errorf("socket root %q is not an absolute path", c.socketRoot)
	}
	return c, nil
}

// limit maps a limit's zero value to def and a negative one to 0 (no limit).
func limit(v, def int64) int64 {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
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
	us, gs, ok := strings.Cut(user, ":")
	if !ok {
		return 0, 0, false, fmt.Errorf("user %q: want numeric uid:gid", user)
	}
	uid, err1 := strconv.Atoi(us)
	gid, err2 := strconv.Atoi(gs)
	if err := errors.Join(err1, err2); err != nil || uid < 0 || gid < 0 {
		return 0, 0, false, fmt.Errorf("user %q: want numeric uid:gid", user)
	}
	if uid == 0 {
		return 0, 0, false, fmt.Errorf("user %q: the kernel never runs as root", user)
	}
	if euid != 0 && (uid != euid || gid != egid) {
		return 0, 0, false, fmt.Errorf("user %q: kernelbox runs as %d:%d and cannot hand its directories to another user; run as root or leave User empty",
			user, euid, egid)
	}
	return uid, gid, euid == 0, nil
}

// withTemplate returns c with a session template's container fields applied: its
// image, limits, max lifetime and environment where it sets them. The executor has
// checked the names of the template's variables; the caps on its limits are
// checked where templates are loaded.
func (c config) withTemplate(t executor.Template) config {
	if t.Image != "" {
		c.image = t.Image
	}
	if t.Memory > 0 {
		c.memory = t.Memory
	}
	if t.CPUs > 0 {
		c.nanoCPUs = int64(t.CPUs * 1e9)
	}
	if t.Pids > 0 {
		c.pidsLimit = t.Pids
	}
	if t.MaxLifetime > 0 {
		c.lifetime = t.MaxLifetime
	}
	if len(t.Env) > 0 {
		keys := make([]string, 0, len(t.Env))
		for k := range t.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		env := slices.Clone(c.env)
		for _, k := range keys {
			env = append(env, k+"="+t.Env[k])
		}
		c.env = env
	}
	return c
}
