package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/kernelbox/kernelbox/backends/local"
	"github.com/kernelbox/kernelbox/backends/none"
	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/capacity"
)

// backend is one row of the backend table: everything the commands know about a
// backend outside its package. Every command, the templates loader, capacity
// planning, doctor and the benchmark read the table; none of them switches on a
// backend's name, and no backend registers itself.
type backend struct {
	name string
	// about is the backend in --backend's usage.
	about string
	// flags are the groups of flags the backend reads; docker and swarm share one.
	flags []backendFlags
	// open builds the backend from the flags.
	open func(ctx context.Context, c *backendConfig, log *slog.Logger) (executor.Backend, error)
	// limits returns what one session gets from the flags, which are also the caps
	// on every template (templates.go). Nil: no container limits.
	limits func(c *backendConfig) executor.Limits
	// plan derives the per-session memory and the session cap from the memory the
	// sessions share (capacity.go). Nil: the backend sets no memory limit and the
	// executor's default cap holds.
	plan func(ctx context.Context, c *backendConfig, maxSessions int) (capacity.Plan, error)
	// doctor checks what the backend needs on this machine (doctor.go). Nil:
	// nothing to check.
	doctor func(ctx context.Context, c *backendConfig, maxSessions int, report reportFunc)
	// runsCode is false for a backend that refuses every call.
	runsCode bool
	// bench says `kernelbox bench` can measure the backend with its defaults.
	bench bool
	// containers says each session is a Docker container on this host, whose
	// memory `docker stats` reports (the benchmark's memory rows).
	containers bool
	// onStop is serve's stop policy when --on-stop is not given (stop.go): keep
	// for docker, swarm and remote (a person upgrading kernelbox wants their
	// sessions there; a gateway keeps its kernels while kernelbox is away),
	// hibernate for local (its kernels are kernelbox's children and cannot
	// outlive it); "" closes them (none runs no code).
	onStop executor.StopPolicy
	// keeps says the backend keeps its sessions' containers (or services, or
	// gateway kernels) across a restart of serve, in a state file of its own,
	// WORKSPACE/state/<name>.json (stop.go).
	keeps bool
}

// backendFlags is a group of backend flags under its heading of -h.
type backendFlags struct {
	title    string
	register func(c *backendConfig, fs *flag.FlagSet)
	// doctor registers the flags of the group `kernelbox doctor` takes too, to
	// check what they name (register itself, or a part of it); nil for none.
	doctor func(c *backendConfig, fs *flag.FlagSet)
}

// backendConfig holds every backend's flags as one command line gave them; each
// row reads its own.
type backendConfig struct {
	python string // local
	image  string // docker and swarm; "" is the backend's default image
	// runtime is the docker sessions' OCI runtime (--runtime), "" the daemon's
	// default; swarm refuses one (a service cannot choose its runtime).
	runtime string
	memory  sizeFlag // docker and swarm, as given; 0 = derive (docker) or the default
	// egressTestHosts is the egress proxy's name map for tests (docker and swarm);
	// nil for servers.
	egressTestHosts hostsFlag
	// egressLimiter bounds every session's egress proxy together (fdlimit.go);
	// made when a docker or swarm backend is opened.
	egressLimiter *egress.Limiter
	// egressUpstreamCA is --egress-upstream-ca (docker and swarm): a PEM file of roots
	// for the hosts the proxy intercepts for secrets; "" is the system's.
	egressUpstreamCA string
	// sessionMemory is the docker per-session limit that capacity planning settled
	// on (capacity.go).
	sessionMemory int64
	remote        remoteFlags // remote.go
	swarm         swarmFlags  // swarm.go
	// stateFile is where a backend that keeps its sessions across a restart
	// keeps what reaching them again takes (stop.go); "" for none.
	stateFile string
}

// backends is the backend table, in the order -h, doctor and errors list them.
func backends() []backend {
	// Groups of flags; docker and swarm share one, and doctor takes three (of
	// swarm's, only --swarm-host).
	local := backendFlags{title: "Backend local", register: (*backendConfig).registerLocal, doctor: (*backendConfig).registerLocal}
	container := backendFlags{title: "Backend docker (and swarm)", register: (*backendConfig).registerContainer, doctor: (*backendConfig).registerContainer} // docker.go
	remote := backendFlags{title: "Backend remote", register: (*backendConfig).registerRemote}                                                               // remote.go
	swarm := backendFlags{title: "Backend swarm", register: (*backendConfig).registerSwarm, doctor: (*backendConfig).registerSwarmHost}                      // swarm.go
	return []backend{
		{name: "none", about: "none", open: openNone},
		{name: "local", about: "local (UNSANDBOXED)", flags: []backendFlags{local}, open: openLocal,
			doctor: doctorPython, runsCode: true, bench: true, onStop: executor.StopHibernate},
		{name: "docker", about: "docker", flags: []backendFlags{container}, open: openDocker,
			limits: dockerLimits, plan: dockerPlan, doctor: doctorDocker, runsCode: true, bench: true, containers: true,
			onStop: executor.StopKeep, keeps: true},
		{name: "remote", about: "remote (existing Jupyter servers, --gateway)", flags: []backendFlags{remote},
			open: openRemote, runsCode: true, onStop: executor.StopKeep, keeps: true},
		{name: "swarm", about: "swarm (a service per session on Docker Swarm, --swarm-*)", flags: []backendFlags{container, swarm},
			open: openSwarm, limits: swarmLimits, doctor: doctorSwarm, runsCode: true,
			onStop: executor.StopKeep, keeps: true},
	}
}

// lookupBackend returns the row of the backend named name ("" is none).
func lookupBackend(name string) (backend, error) {
	if name == "" {
		name = "none"
	}
	var names []string
	for _, b := range backends() {
		if b.name == name {
			return b, nil
		}
		names = append(names, b.name)
	}
	return backend{}, fmt.Errorf("unknown backend %q: use %s or %s", name, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// backendUsage is --backend's usage: where kernels run, every row.
func backendUsage() string {
	var about []string
	for _, b := range backends() {
		about = append(about, b.about)
	}
	return "where kernels run: " + strings.Join(about, ", ")
}

// register adds every backend's flag groups to fs, each once, under its heading.
func (c *backendConfig) register(fs *flagSet) {
	var done []string
	for _, b := range backends() {
		for _, g := range b.flags {
			if slices.Contains(done, g.title) {
				continue
			}
			done = append(done, g.title)
			fs.add(g.title, func(fs *flag.FlagSet) { g.register(c, fs) })
		}
	}
}

// isBackendGroup reports whether title heads a group of backend flags, and
// whether the backend named name reads it.
func isBackendGroup(title, name string) (group, read bool) {
	for _, b := range backends() {
		for _, g := range b.flags {
			if g.title == title {
				group = true
				read = read || b.name == name
			}
		}
	}
	return group, read
}

// openNone builds the backend that refuses every call.
func openNone(context.Context, *backendConfig, *slog.Logger) (executor.Backend, error) {
	return none.New(), nil
}

// registerLocal adds the local backend's flags.
func (c *backendConfig) registerLocal(fs *flag.FlagSet) {
	fs.StringVar(&c.python, "python", "", "Python with jupyter_server and ipykernel, for --backend local (default: KERNELBOX_PYTHON, /usr/bin/python3, python3)")
}

// openLocal builds the local backend, and says it is unsandboxed.
func openLocal(_ context.Context, c *backendConfig, log *slog.Logger) (executor.Backend, error) {
	b, err := local.New(local.Options{Python: c.python, Logger: log})
	if err != nil {
		return nil, err
	}
	log.Warn("backend local: code runs UNSANDBOXED with this user's rights; use --backend docker for untrusted code")
	return b, nil
}
