package main

import (
	"context"
	"flag"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/backends/docker"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/capacity"
)

// registerContainer adds the flags docker and swarm share: the kernel image and
// each session's memory.
func (c *backendConfig) registerContainer(fs *flag.FlagSet) {
	fs.StringVar(&c.image, "image", "", "kernel image for --backend docker (default kernelbox/kernel:latest)")
	fs.StringVar(&c.runtime, "runtime", "", "OCI runtime of --backend docker's containers, e.g. runsc for gVisor (register it with scripts/setup.sh --gvisor; docs/security.md). Default: the daemon's default runtime. Not for swarm: a service cannot choose one")
	fs.Var(&c.memory, "memory", "per-session memory limit for --backend docker, e.g. 2g or 512m, none for no limit; swap is limited to the same (default 2 GiB, or the whole budget when less)")
	fs.StringVar(&c.egressUpstreamCA, "egress-upstream-ca", "", "PEM file of the roots with which the egress proxy verifies the hosts it intercepts to add a template's secrets, for hosts with a private CA (docker and swarm; default: the system's roots; docs/network.md)")
	fs.Var(&c.egressTestHosts, "egress-test-hosts", "FOR TESTS ONLY: NAME=ADDR[,ADDR...] (repeatable): the egress proxy resolves these names to these addresses and no other name at all, for a test internet the tests make (docs/network.md)")
}

// openDocker builds the docker backend with the memory capacity planning settled on.
func openDocker(ctx context.Context, c *backendConfig, log *slog.Logger) (executor.Backend, error) {
	if c.egressLimiter == nil {
		c.egressLimiter = egressLimiter(log)
	}
	o := dockerOptions(c, log)
	roots, err := upstreamRoots(c.egressUpstreamCA)
	if err != nil {
		return nil, err
	}
	o.EgressLimiter, o.EgressUpstreamRoots = c.egressLimiter, roots
	return docker.New(ctx, o)
}

// dockerOptions are the docker backend's options from the flags, with the memory
// capacity planning settled on: what openDocker builds and dockerLimits shows.
func dockerOptions(c *backendConfig, log *slog.Logger) docker.Options {
	return docker.Options{Image: c.image, Runtime: c.runtime, Memory: c.sessionMemory, Logger: log, StateFile: c.stateFile, EgressTestHosts: c.egressTestHosts}
}

// dockerLimits is what one docker session gets: its image and container limits.
func dockerLimits(c *backendConfig) executor.Limits {
	return dockerOptions(c, nil).Limits()
}

// dockerPlan plans the docker sessions' memory from what the daemon reports.
func dockerPlan(ctx context.Context, c *backendConfig, maxSessions int) (capacity.Plan, error) {
	return dockerCapacity(ctx, c.memory, maxSessions)
}

// dockerCapacity plans the docker sessions' memory: the per-session limit (--memory)
// and the session cap (--max-sessions), each derived when not given, from the memory
// the daemon reports. Without a daemon answer the plan derives no cap, and the
// executor's default applies.
func dockerCapacity(ctx context.Context, memory sizeFlag, maxSessions int) (capacity.Plan, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	mem, err := docker.DaemonMemory(ctx, "")
	return capacity.Make(capacity.Input{
		Memory:               mem,
		SessionMemory:        int64(memory),
		DefaultSessionMemory: docker.DefaultMemory,
		MaxSessions:          maxSessions,
	}), err
}

// doctorDocker checks the Docker engine, the kernel image, and what serve would
// promise docker sessions with these flags.
func doctorDocker(ctx context.Context, c *backendConfig, maxSessions int, report reportFunc) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}} (API {{.Server.APIVersion}})").CombinedOutput()
	if err != nil {
		report(false, "docker engine", strings.TrimSpace(string(out)), "install and start Docker (Debian: apt-get install docker.io) to use --backend docker")
		return
	}
	report(true, "docker engine", strings.TrimSpace(string(out)), "")
	image := c.image
	if image == "" {
		image = docker.DefaultImage
	}
	has, err := docker.ImageExists(ctx, image)
	switch {
	case err != nil:
		report(false, "kernel image", err.Error(), "")
	case !has:
		report(false, "kernel image", image+" is missing", "kernelbox image build  (or: bash backends/docker/kernel-image/build.sh)")
	default:
		report(true, "kernel image", image, "")
	}
	doctorRuntime(ctx, c.runtime, report)
	plan, err := dockerCapacity(ctx, c.memory, maxSessions)
	if err != nil {
		report(false, "docker capacity", err.Error(), "")
	} else {
		report(!plan.Overcommitted(), "docker capacity", plan.String(), plan.Warning("--memory", "--max-sessions"))
	}
}

// doctorRuntime reports the daemon's runtimes: the one --runtime names must be
// among them and able to run sessions, and gVisor's is told either way, with how
// to register it and what is amiss with its arguments.
func doctorRuntime(ctx context.Context, runtime string, report reportFunc) {
	rs, err := docker.HostRuntimes(ctx, "")
	if err != nil {
		report(false, "container runtime", err.Error(), "")
		return
	}
	known := strings.Join(rs.Names, ", ") + " (default " + rs.Default + ")"
	register := "scripts/setup.sh --gvisor  (installs Debian's runsc, registers it in /etc/docker/daemon.json, reloads dockerd)"
	gv := docker.RuntimeGVisor
	switch {
	case runtime != "" && !slices.Contains(rs.Names, runtime):
		fix := "register it with the Docker daemon, or choose one of " + strings.Join(rs.Names, ", ")
		if runtime == gv {
			fix = register
		}
		report(false, "container runtime", "--runtime "+runtime+" is not registered with the Docker daemon; it knows "+known, fix)
		return
	case runtime != "" && rs.Problems[runtime] != "":
		report(false, "container runtime", runtime+" is "+rs.Problems[runtime], register)
		return
	case runtime != "":
		report(true, "container runtime", runtime+" (the daemon knows "+known+")", "")
	case !slices.Contains(rs.Names, gv):
		report(true, "container runtime", rs.Default+"; gVisor (runsc) is not registered", "for a second wall around sessions: "+register+", then --runtime runsc")
		return
	case rs.Problems[gv] != "":
		report(false, "container runtime", rs.Default+"; gVisor (runsc) is "+rs.Problems[gv], register)
		return
	default:
		report(true, "container runtime", rs.Default+"; gVisor (runsc) is registered: --runtime runsc puts sessions behind a second wall", "")
	}
	if slices.Contains(rs.Names, gv) && (runtime == "" || runtime == gv) {
		if w := docker.WarnNetwork(rs.Args[gv]); w != "" {
			report(false, "gvisor network", w, register)
		}
	}
}
