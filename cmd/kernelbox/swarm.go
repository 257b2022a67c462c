package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/kernelbox/kernelbox/backends/swarm"
	"github.com/kernelbox/kernelbox/executor"
)

// swarmFlags configure --backend swarm: one hardened swarm service per session,
// placed by the swarm's scheduler. kernelbox itself runs in a container on a
// manager, with the manager's Docker socket mounted (see docs/swarm.md).
type swarmFlags struct {
	host          string
	self          string
	owner         string
	constraints   multiFlag
	cpus          float64
	pids          int64
	reserveMemory sizeFlag
	reserveCPUs   float64
}

// registerSwarm adds the swarm backend's own flags; it reads --image and --memory
// too (registerContainer).
func (c *backendConfig) registerSwarm(fs *flag.FlagSet) {
	c.registerSwarmHost(fs)
	s := &c.swarm
	fs.StringVar(&s.self, "swarm-self", "", "--backend swarm: the container kernelbox runs in, attached to each session's overlay network (default: this hostname, Docker's short container id)")
	fs.StringVar(&s.owner, "swarm-owner", "", "--backend swarm: this deployment's name in labels; at start, what another (dead) kernelbox of the same owner left is removed, except the sessions this workspace's state keeps (default kernelbox)")
	fs.Var(&s.constraints, "swarm-constraint", "--backend swarm: placement constraint for session services, e.g. node.labels.kernels==yes (repeatable)")
	fs.Float64Var(&s.cpus, "swarm-cpus", 0, "--backend swarm: CPU limit per session (default 2)")
	fs.Int64Var(&s.pids, "swarm-pids", 0, "--backend swarm: processes+threads limit per session (default 512)")
	fs.Var(&s.reserveMemory, "swarm-reserve-memory", "--backend swarm: memory the scheduler reserves per session, e.g. 256m (default 128m)")
	fs.Float64Var(&s.reserveCPUs, "swarm-reserve-cpus", 0, "--backend swarm: CPUs the scheduler reserves per session (default 0.05)")
}

// registerSwarmHost adds --swarm-host, which doctor takes too (the backend table).
func (c *backendConfig) registerSwarmHost(fs *flag.FlagSet) {
	fs.StringVar(&c.swarm.host, "swarm-host", "", "--backend swarm: a swarm manager's Docker daemon, e.g. unix:///var/run/docker.sock (default DOCKER_HOST, else the local socket); doctor checks it when given: nodes ready, each daemon with no-new-privileges and the image (a short probe job on every node)")
}

// openSwarm builds the swarm backend.
func openSwarm(ctx context.Context, c *backendConfig, log *slog.Logger) (executor.Backend, error) {
	if c.runtime != "" {
		return nil, fmt.Errorf("--runtime %s: a Docker Swarm service cannot choose its OCI runtime; set default-runtime in each node's /etc/docker/daemon.json instead (docs/security.md, \"Two walls\")", c.runtime)
	}
	if c.egressLimiter == nil {
		c.egressLimiter = egressLimiter(log)
	}
	roots, err := upstreamRoots(c.egressUpstreamCA)
	if err != nil {
		return nil, err
	}
	o := swarmOptions(c, log)
	o.EgressUpstreamRoots = roots
	return swarm.New(ctx, o)
}

// swarmOptions are the swarm backend's options from the flags: what openSwarm
// builds and swarmLimits shows.
func swarmOptions(c *backendConfig, log *slog.Logger) swarm.Options {
	s := &c.swarm
	return swarm.Options{
		DockerHost:      s.host,
		Self:            s.self,
		Owner:           s.owner,
		Image:           c.image,
		Constraints:     s.constraints,
		Memory:          int64(c.memory),
		CPUs:            s.cpus,
		PidsLimit:       s.pids,
		ReserveMemory:   int64(s.reserveMemory),
		ReserveCPUs:     s.reserveCPUs,
		StateFile:       c.stateFile,
		EgressTestHosts: c.egressTestHosts,
		EgressLimiter:   c.egressLimiter,
		Logger:          log,
	}
}

// swarmLimits is what one swarm session gets from the flags: its image and
// service limits.
func swarmLimits(c *backendConfig) executor.Limits {
	return swarmOptions(c, nil).Limits()
}

// doctorSwarm checks a swarm manager's daemon, when doctor was given --swarm-host:
// nodes ready, each daemon with no-new-privileges and the image (a short probe
// job on every node).
func doctorSwarm(ctx context.Context, c *backendConfig, _ int, report reportFunc) {
	if c.swarm.host == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	detail, err := swarm.Check(ctx, swarm.Options{DockerHost: c.swarm.host, Image: c.image, Self: "doctor"})
	if err != nil {
		report(false, "swarm", err.Error(), `each node's daemon.json needs "no-new-privileges": true and the image (docker save IMAGE | docker -H NODE load); see docs/swarm.md`)
		return
	}
	report(true, "swarm", detail, "")
}
