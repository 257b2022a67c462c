// Package sandboxtest reads the hardening back out of the engine objects that
// sandbox.Spec translates into, so that tests can hold a docker container's create
// request and a swarm service's task to the same hardening, and each backend's
// final object to its translation.
package sandboxtest

import (
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"
)

// Tmpfs is one tmpfs mount: its size in bytes (0: no limit) and mode, in the
// engine's reading (0o1777 is sticky and writable by all).
type Tmpfs struct {
	Size int64
	Mode os.FileMode
}

// Hardening is what a container's hardening comes to, in terms both engines
// share. Limits of 0 mean none.
type Hardening struct {
	Image      string
	User       string
	Command    []string // the server's command, past any no-new-privileges check
	Env        []string
	WorkDir    string
	CapDrop    []string
	CapAdd     []string
	ReadOnly   bool
	Init       bool
	NoNewPrivs bool // set by the engine, or checked by the command before it runs
	Tmpfs      map[string]Tmpfs
	Memory     int64
	NanoCPUs   int64
	Pids       int64
	Labels     map[string]string
	Log        string // driver and options, "json-file max-file=2 max-size=10m"
}

// OfContainer reads the hardening of a Docker container's create request.
func OfContainer(cfg *container.Config, hc *container.HostConfig) Hardening {
	h := Hardening{
		Image: cfg.Image, User: cfg.User, Command: cfg.Entrypoint, Env: cfg.Env, WorkDir: cfg.WorkingDir,
		CapDrop: hc.CapDrop, CapAdd: hc.CapAdd, ReadOnly: hc.ReadonlyRootfs, Init: hc.Init != nil && *hc.Init,
		NoNewPrivs: slices.Contains(hc.SecurityOpt, "no-new-privileges:true") || slices.Contains(hc.SecurityOpt, "no-new-privileges"),
		Tmpfs:      map[string]Tmpfs{},
		Memory:     hc.Memory, NanoCPUs: hc.NanoCPUs, Labels: cfg.Labels,
		Log: logString(hc.LogConfig.Type, hc.LogConfig.Config),
	}
	if hc.PidsLimit != nil && *hc.PidsLimit > 0 {
		h.Pids = *hc.PidsLimit
	}
	for target, opts := range hc.Tmpfs {
		var t Tmpfs
		for _, o := range strings.Split(opts, ",") {
			k, v, _ := strings.Cut(o, "=")
			switch k {
			case "size":
				t.Size, _ = strconv.ParseInt(v, 10, 64)
			case "mode":
				// The engine reads a mount's mode as chmod does (octal, with
				// 01000 sticky), as it writes TmpfsOptions.Mode.
				m, _ := strconv.ParseUint(v, 8, 32)
				t.Mode = os.FileMode(m)
			}
		}
		h.Tmpfs[target] = t
	}
	for _, m := range hc.Mounts {
		if m.Type == mount.TypeTmpfs && m.TmpfsOptions != nil {
			h.Tmpfs[m.Target] = Tmpfs{Size: m.TmpfsOptions.SizeBytes, Mode: m.TmpfsOptions.Mode}
		}
	}
	return h
}

// OfTask reads the hardening of a swarm service's task.
func OfTask(t swarm.TaskSpec) Hardening {
	cs := t.ContainerSpec
	h := Hardening{
		Image: cs.Image, User: cs.User, Command: cs.Command, Env: cs.Env, WorkDir: cs.Dir,
		CapDrop: cs.CapabilityDrop, CapAdd: cs.CapabilityAdd, ReadOnly: cs.ReadOnly, Init: cs.Init != nil && *cs.Init,
		Tmpfs: map[string]Tmpfs{}, Labels: cs.Labels,
	}
	if p := cs.Privileges; p != nil && p.NoNewPrivileges {
		h.NoNewPrivs = true
	}
	// The shell of sandbox.RequireNoNewPrivs: sh -c SCRIPT NAME CMD...
	if len(h.Command) > 4 && h.Command[0] == "sh" && h.Command[1] == "-c" &&
		strings.Contains(h.Command[2], "NoNewPrivs:[[:space:]]*1$") && strings.HasSuffix(h.Command[2], `exec "$@"`) {
		h.NoNewPrivs = true
		h.Command = h.Command[4:]
	}
	for _, m := range cs.Mounts {
		if m.Type == mount.TypeTmpfs && m.TmpfsOptions != nil {
			h.Tmpfs[m.Target] = Tmpfs{Size: m.TmpfsOptions.SizeBytes, Mode: m.TmpfsOptions.Mode}
		}
	}
	if r := t.Resources; r != nil && r.Limits != nil {
		h.Memory, h.NanoCPUs, h.Pids = r.Limits.MemoryBytes, r.Limits.NanoCPUs, r.Limits.Pids
	}
	if t.LogDriver != nil {
		h.Log = logString(t.LogDriver.Name, t.LogDriver.Options)
	}
	return h
}

func logString(driver string, opts map[string]string) string {
	s := driver
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		s += " " + k + "=" + opts[k]
	}
	return s
}
