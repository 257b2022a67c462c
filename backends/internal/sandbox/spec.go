// Package sandbox describes, once, the hardened container a kernel runs in for the
// docker and swarm backends: the image, the Jupyter Server under a hard max
// lifetime, the environment, a non-root user, all capabilities dropped,
// no-new-privileges, a read-only root with a tmpfs at /tmp, init, memory, CPU and
// process limits, bounded logs and the labels that say who made it. Each backend
// translates a [Spec] into its engine's types ([Spec.Container] for a container's
// create request, [Spec.Task] for a swarm service's task) and adds what only it has
// (mounts, networks, secrets); translate_test.go holds the two translations to the
// same hardening.
//
// Start reading at [Spec] and [Settings]; labels.go names what the backends label,
// starterror.go is the error of a container or task that did not come up.
package sandbox

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/executor"
)

// Defaults for the zero values of [Settings].
const (
	DefaultImage       = "kernelbox/kernel:latest"
	DefaultMaxLifetime = 24 * time.Hour
	DefaultMemory      = 2 << 30   // bytes
	DefaultCPUs        = 2.0       // CPUs' worth of time
	DefaultPidsLimit   = 512       // processes and threads
	DefaultTmpSize     = 512 << 20 // bytes of tmpfs at /tmp
	DefaultUser        = "1000:1000"
	DefaultPython      = "python3"
)

// Spec is one kernel's hardened container, with every default applied. Its zero
// value is not useful (no image); make one with [Settings.Spec]. Its hardening
// switches are off in the zero value, so that a forgotten field leaves the
// container hardened.
type Spec struct {
	// Image is the kernel image.
	Image string
	// Python is the interpreter in the image that can import jupyter_server.
	Python string
	// MaxLifetime is the hard limit on the container's life, enforced by
	// `timeout` inside it even when kernelbox is gone; rounded up to whole seconds.
	MaxLifetime time.Duration
	// UID and GID are the ids the kernel runs as; never 0 (see [ParseUser]).
	UID, GID int
	// Memory is the memory limit in bytes (and, where the engine can say so, the
	// memory plus swap limit, so that the kernel never swaps); 0 is no limit.
	Memory int64
	// NanoCPUs is the CPU limit in billionths of a CPU; 0 is no limit.
	NanoCPUs int64
	// Pids limits processes plus threads; 0 is no limit.
	Pids int64
	// TmpSize is the size of the tmpfs at /tmp (HOME and Jupyter's runtime files)
	// in bytes; 0 is no limit but the host's memory.
	TmpSize int64
	// CapAdd lists capabilities added back after all are dropped.
	CapAdd []string
	// NewPrivileges lets setuid binaries gain privileges (no no-new-privileges).
	NewPrivileges bool
	// WritableRoot makes the root file system writable.
	WritableRoot bool
	// NoInit runs the server as pid 1 instead of under the engine's init, which
	// reaps zombies and forwards signals.
	NoInit bool
	// Env lists "KEY=VALUE" entries added after the container's own environment
	// ([Spec.Environment]), so that they override it.
	Env []string
}

// Settings are the container options both backends take, as a user gives them:
// each zero value means its default, and a negative limit means no limit.
type Settings struct {
	Image       string        // defaults to DefaultImage
	Python      string        // defaults to DefaultPython
	MaxLifetime time.Duration // defaults to DefaultMaxLifetime
	Memory      int64         // bytes; defaults to DefaultMemory
	CPUs        float64       // defaults to DefaultCPUs
	PidsLimit   int64         // defaults to DefaultPidsLimit
	TmpSize     int64         // bytes; defaults to DefaultTmpSize
}

// Spec returns the container the settings describe, with defaults applied. The
// user is left for the backend to choose (UID and GID are 0).
func (s Settings) Spec() Spec {
	sp := Spec{
		Image: s.Image, Python: s.Python, MaxLifetime: s.MaxLifetime,
		Memory:   Limit(s.Memory, DefaultMemory),
		NanoCPUs: NanoCPUs(s.CPUs, DefaultCPUs),
		Pids:     Limit(s.PidsLimit, DefaultPidsLimit),
		TmpSize:  Limit(s.TmpSize, DefaultTmpSize),
	}
	if sp.Image == "" {
		sp.Image = DefaultImage
	}
	if sp.Python == "" {
		sp.Python = DefaultPython
	}
	if sp.MaxLifetime <= 0 {
		sp.MaxLifetime = DefaultMaxLifetime
	}
	return sp
}

// Limits returns what one session gets from the settings, with defaults applied:
// its image and container limits, as a server shows them (executor.Options.Limits)
// and caps templates with. A limit that is off is 0.
func (s Settings) Limits() executor.Limits {
	sp := s.Spec()
	return executor.Limits{
		Kernel: "python3", Image: sp.Image, Memory: sp.Memory, CPUs: float64(sp.NanoCPUs) / 1e9,
		Pids: sp.Pids, MaxLifetime: sp.MaxLifetime,
	}
}

// Limit maps a limit's zero value to def and a negative one to 0 (no limit).
func Limit(v, def int64) int64 {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// NanoCPUs maps a CPU count to billionths of a CPU: zero is def, negative is no
// limit (0).
func NanoCPUs(v, def float64) int64 {
	switch {
	case v == 0:
		return int64(def * 1e9)
	case v < 0:
		return 0
	}
	return int64(v * 1e9)
}

// ParseUser parses a numeric "uid:gid" and refuses uid 0: the kernel never runs
// as root.
func ParseUser(user string) (uid, gid int, err error) {
	us, gs, ok := strings.Cut(user, ":")
	uid, err1 := strconv.Atoi(us)
	gid, err2 := strconv.Atoi(gs)
	if !ok || errors.Join(err1, err2) != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("user %q: want numeric uid:gid", user)
	}
	if uid == 0 {
		return 0, 0, fmt.Errorf("user %q: the kernel never runs as root", user)
	}
	return uid, gid, nil
}

// User returns the container's "uid:gid".
func (s Spec) User() string { return strconv.Itoa(s.UID) + ":" + strconv.Itoa(s.GID) }

// WithTemplate returns s with a session template's container fields applied: its
// image, limits, max lifetime and environment where it sets them (the
// environment after s's own, in the order of its names). The executor has checked
// the names of the template's variables; the caps on its limits are checked where
// templates are loaded. s itself is left as it was.
func (s Spec) WithTemplate(t executor.Template) Spec {
	if t.Image != "" {
		s.Image = t.Image
	}
	if t.Memory > 0 {
		s.Memory = t.Memory
	}
	if t.CPUs > 0 {
		s.NanoCPUs = int64(t.CPUs * 1e9)
	}
	if t.Pids > 0 {
		s.Pids = t.Pids
	}
	if t.MaxLifetime > 0 {
		s.MaxLifetime = t.MaxLifetime
	}
	if len(t.Env) > 0 {
		keys := make([]string, 0, len(t.Env))
		for k := range t.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		env := slices.Clone(s.Env)
		for _, k := range keys {
			env = append(env, k+"="+t.Env[k])
		}
		s.Env = env
	}
	return s
}

// Server says where a container's Jupyter Server finds what kernelbox gives it;
// the backends place these differently (bind mounts, swarm configs and secrets).
type Server struct {
	// Launcher is the path of the server's launcher script in the container.
	Launcher string
	// Args are the server's flags (serverflags.Args, without the token).
	Args []string
	// ConfigDir is JUPYTER_CONFIG_DIR: read-only for the kernel, it holds the
	// server's token config.
	ConfigDir string
	// JupyterPath is JUPYTER_PATH: it holds kernelbox's kernelspec.
	JupyterPath string
}

// KillGrace is how long, in seconds, `timeout` waits after SIGTERM at the max
// lifetime before it sends SIGKILL.
const KillGrace = 10

// Command is the container's whole command line: the Jupyter Server under a hard
// `timeout`, so that the container stops itself at its max lifetime even when
// nobody is left to stop it. -Xfrozen_modules=off keeps debugpy (in ipykernel)
// from warning on every start.
func (s Spec) Command(srv Server) []string {
	secs := int64(math.Ceil(s.MaxLifetime.Seconds()))
	cmd := []string{
		"timeout", "-k", strconv.Itoa(KillGrace), strconv.FormatInt(secs, 10),
		s.Python, "-Xfrozen_modules=off", srv.Launcher,
	}
	return append(cmd, srv.Args...)
}

// Environment is the container's environment. The root file system is read-only,
// so everything Jupyter, IPython and matplotlib write at run time goes to the /tmp
// tmpfs; nothing in it is secret. s.Env comes last.
func (s Spec) Environment(srv Server) []string {
	env := []string{
		"HOME=/tmp",
		"XDG_CACHE_HOME=/tmp/.cache",
		"JUPYTER_RUNTIME_DIR=/tmp/.jupyter/runtime",
		"JUPYTER_DATA_DIR=/tmp/.jupyter/data",
		"JUPYTER_CONFIG_DIR=" + srv.ConfigDir,
		"JUPYTER_PATH=" + srv.JupyterPath,
		"IPYTHONDIR=/tmp/.ipython",
		"MPLCONFIGDIR=/tmp/.config/matplotlib",
		// Inline figures: plots come back as display data (and artifacts).
		"MPLBACKEND=module://matplotlib_inline.backend_inline",
		"PYTHONUNBUFFERED=1",
		"PYDEVD_DISABLE_FILE_VALIDATION=1",
	}
	return append(env, s.Env...)
}
