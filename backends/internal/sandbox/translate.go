package sandbox

import (
	"maps"
	"slices"
	"strconv"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"
)

// Workspace is the kernel's working directory in the container, which holds the
// session's files, and the server's root directory.
const Workspace = "/workspace"

// Tmp is where the container's tmpfs is mounted: HOME, Jupyter's runtime files
// and the server's socket.
const Tmp = "/tmp"

// tmpfsMode lets every user write /tmp, as on any system (sticky).
const tmpfsMode = 0o1777

// logOptions bound the container's json-file log, where the kernel's own stderr
// lands for the container's whole life.
func logOptions() map[string]string { return map[string]string{"max-size": "10m", "max-file": "2"} }

// Container translates s into a Docker container's create request: the image, the
// server's command as the entrypoint (so that an image's ENTRYPOINT cannot wrap
// the server; with an entrypoint given, the daemon does not append the image's CMD
// either), the environment, the user, the working directory, labels, and in the
// host config every hardening setting: capabilities, no-new-privileges, the
// read-only root, the /tmp tmpfs, init, memory (with swap limited to the same
// total), CPUs, pids and bounded logs. The backend adds the name, mounts, network
// and runtime.
func (s Spec) Container(srv Server, labels map[string]string) (*container.Config, *container.HostConfig) {
	tmpfs := "rw,exec,nosuid,nodev,mode=" + strconv.FormatUint(tmpfsMode, 8)
	if s.TmpSize > 0 {
		tmpfs += ",size=" + strconv.FormatInt(s.TmpSize, 10)
	}
	init := !s.NoInit
	pids := s.Pids
	if pids <= 0 {
		pids = -1 // Docker reads 0 as "the daemon's default"
	}
	hc := &container.HostConfig{
		CapDrop:        []string{"ALL"},
		CapAdd:         slices.Clone(s.CapAdd),
		ReadonlyRootfs: !s.WritableRoot,
		Tmpfs:          map[string]string{Tmp: tmpfs},
		Init:           &init,
		LogConfig:      container.LogConfig{Type: "json-file", Config: logOptions()},
		Resources:      container.Resources{Memory: s.Memory, NanoCPUs: s.NanoCPUs, PidsLimit: &pids},
	}
	if s.Memory > 0 {
		// memory+swap equal to memory: no swap, so a runaway kernel is OOM-killed
		// promptly instead of thrashing.
		hc.MemorySwap = s.Memory
	}
	if !s.NewPrivileges {
		hc.SecurityOpt = []string{"no-new-privileges:true"}
	}
	cfg := &container.Config{
		Image:      s.Image,
		User:       s.User(),
		Entrypoint: s.Command(srv),
		Env:        s.Environment(srv),
		WorkingDir: Workspace,
		Labels:     maps.Clone(labels),
	}
	return cfg, hc
}

// Task translates s into a swarm service's task: its container (the image, the
// server's command, the environment, the user, the working directory, labels,
// capabilities, the read-only root, init and the /tmp tmpfs), its resource limits
// and its bounded log driver. A service spec cannot ask for no-new-privileges
// (Engine 20.10 drops the field), so the command first checks that the node's
// daemon gave it and refuses to run otherwise ([RequireNoNewPrivs]). A swarm task
// has no swap limit of its own (API 1.41): Memory bounds its memory only. The
// backend adds the rest: mounts beside /tmp, secrets, configs, reservations,
// placement and networks.
func (s Spec) Task(srv Server, labels map[string]string) swarm.TaskSpec {
	init := !s.NoInit
	cmd := s.Command(srv)
	if !s.NewPrivileges {
		cmd = RequireNoNewPrivs("kernelbox-task", cmd)
	}
	return swarm.TaskSpec{
		ContainerSpec: &swarm.ContainerSpec{
			Image:          s.Image,
			Labels:         maps.Clone(labels),
			Command:        cmd,
			Env:            s.Environment(srv),
			Dir:            Workspace,
			User:           s.User(),
			Init:           &init,
			ReadOnly:       !s.WritableRoot,
			CapabilityDrop: []string{"ALL"},
			CapabilityAdd:  slices.Clone(s.CapAdd),
			Mounts:         []mount.Mount{TmpfsMount(Tmp, s.TmpSize)},
		},
		Resources: &swarm.ResourceRequirements{
			Limits: &swarm.Limit{NanoCPUs: s.NanoCPUs, MemoryBytes: s.Memory, Pids: s.Pids},
		},
		LogDriver: &swarm.Driver{Name: "json-file", Options: logOptions()},
	}
}

// TmpfsMount is a tmpfs of size bytes (0: bounded by memory only) at target in a
// swarm task, writable by every user (mode 1777).
func TmpfsMount(target string, size int64) mount.Mount {
	return mount.Mount{Type: mount.TypeTmpfs, Target: target, TmpfsOptions: &mount.TmpfsOptions{SizeBytes: size, Mode: tmpfsMode}}
}

// ExitNoNewPrivs is the exit code of a command wrapped by [RequireNoNewPrivs]
// that refused to run.
const ExitNoNewPrivs = 97

// nnpCheck is the shell script of [RequireNoNewPrivs]; its exit code is
// ExitNoNewPrivs.
const nnpCheck = `grep -q '^NoNewPrivs:[[:space:]]*1$' /proc/self/status || {
  echo "kernelbox: refusing to start: NoNewPrivs is not set; this node's Docker daemon needs \"no-new-privileges\": true in its daemon.json" >&2
  exit 97
}
exec "$@"`

// RequireNoNewPrivs wraps cmd in a shell that runs it only when the process has
// NoNewPrivs set, and otherwise says why on stderr and exits [ExitNoNewPrivs]. A
// swarm daemon without "no-new-privileges": true would start a task with
// NoNewPrivs 0 whatever its spec says. name is the shell's $0, for its messages.
func RequireNoNewPrivs(name string, cmd []string) []string {
	return append([]string{"sh", "-c", nnpCheck, name}, cmd...)
}
