package docker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
)

// How kernelbox reaches a container's server ([Options.Transport]).
const (
	// TransportPinned dials the server's socket on the container's own /tmp,
	// pinned by descriptor through /proc/<pid>/root (ready.go). The container's
	// file system must be the host kernel's: runc, crun.
	TransportPinned = "pinned"
	// TransportRelay takes connections that a relay in the container opens
	// towards a socket in the container's state directory (relay.go). It works
	// under any runtime, gVisor's included.
	TransportRelay = "relay"
)

// RuntimeGVisor is gVisor's runtime as scripts/gvisor.sh registers it.
const RuntimeGVisor = "runsc"

// ErrNoRuntime means the Docker daemon does not know the OCI runtime a session
// asks for. Errors that wrap it list the runtimes it knows and how to register
// gVisor's.
var ErrNoRuntime = errors.New("runtime not registered with the Docker daemon")

// runcFamily are runtimes whose containers' file systems the host reaches
// through /proc/<pid>/root, so the pinned transport works.
var runcFamily = []string{"runc", "io.containerd.runc.v2", "crun"}

// transportFor is the transport for a session whose runtime is runtime ("" is
// the daemon's default, def), given the configured transport.
func transportFor(configured, runtime, def string) string {
	if configured != "" {
		return configured
	}
	if runtime == "" {
		runtime = def
	}
	if runtime == "" || slices.Contains(runcFamily, runtime) {
		return TransportPinned
	}
	return TransportRelay
}

// Runtimes returns the OCI runtimes the Docker daemon at host knows, and its
// default one. host is as for [Options.DockerHost]; "" means the environment's.
func Runtimes(ctx context.Context, host string) (names []string, def string, err error) {
	rs, err := HostRuntimes(ctx, host)
	return rs.Names, rs.Default, err
}

// RuntimeSet is what the Docker daemon says of its OCI runtimes.
type RuntimeSet struct {
	Names   []string // sorted
	Default string
	// Problems says, by runtime name, why a registered runtime cannot run
	// kernelbox's sessions as registered (gVisor without the host-uds flag the
	// relay needs).
	Problems map[string]string
	// Args are each runtime's registered arguments (runtimeArgs).
	Args map[string][]string
}

// HostRuntimes asks the Docker daemon at host for its runtimes.
func HostRuntimes(ctx context.Context, host string) (RuntimeSet, error) {
	c, err := dockerapi.NewClient(host)
	if err != nil {
		return RuntimeSet{}, err
	}
	defer c.Close()
	return daemonRuntimes(ctx, c)
}

// infoAPI is the one call daemonRuntimes needs.
type infoAPI interface {
	Info(ctx context.Context, options client.InfoOptions) (client.SystemInfoResult, error)
}

// daemonRuntimes asks the daemon for its runtimes.
func daemonRuntimes(ctx context.Context, api infoAPI) (RuntimeSet, error) {
	r, err := api.Info(ctx, client.InfoOptions{})
	if err != nil {
		return RuntimeSet{}, fmt.Errorf("docker info: %w", err)
	}
	rs := RuntimeSet{Default: r.Info.DefaultRuntime, Problems: map[string]string{}, Args: map[string][]string{}}
	for n, rt := range r.Info.Runtimes {
		rs.Names = append(rs.Names, n)
		rs.Args[n] = rt.Args
		if why := gvisorProblem(rt.Path, rt.Args); why != "" {
			rs.Problems[n] = why
		}
	}
	slices.Sort(rs.Names)
	return rs, nil
}

// gvisorProblem says why gVisor registered as path with args cannot run
// kernelbox's sessions, or "" (also for any other runtime): without the host-uds
// flag a process in the sandbox cannot connect to a host socket, and the relay
// cannot reach kernelbox.
func gvisorProblem(path string, args []string) string {
	if filepath.Base(path) != "runsc" {
		return ""
	}
	for _, a := range args {
		a = strings.TrimLeft(a, "-")
		if a == "fsgofer-host-uds" || a == "fsgofer-host-uds=true" || a == "host-uds=open" || a == "host-uds=all" {
			return ""
		}
	}
	return "registered without --fsgofer-host-uds (or a newer gVisor's --host-uds=open), so a process in the sandbox cannot connect to kernelbox's relay socket"
}

// WarnNetwork says what is amiss with gVisor's network argument, or "": without
// --network=none every start fails in the root network namespace (Debian's runsc
// 0.0~20221219, checked).
func WarnNetwork(args []string) string {
	for _, a := range args {
		if strings.TrimLeft(a, "-") == "network=none" {
			return ""
		}
	}
	return "no --network=none in its runtime arguments: Debian's runsc then fails every start here (\"cannot run with network enabled in root network namespace\")"
}

// checkRuntime returns an error wrapping ErrNoRuntime unless name is "" or one of
// rs's that can run sessions.
func checkRuntime(name string, rs RuntimeSet) error {
	if name == "" {
		return nil
	}
	fix := ""
	if name == RuntimeGVisor {
		fix = "; register gVisor with `scripts/setup.sh --gvisor` (installs Debian's runsc, adds it to /etc/docker/daemon.json, reloads dockerd)"
	}
	if !slices.Contains(rs.Names, name) {
		return fmt.Errorf("%w: %q (the daemon knows %s)%s", ErrNoRuntime, name, strings.Join(rs.Names, ", "), fix)
	}
	if why := rs.Problems[name]; why != "" {
		return fmt.Errorf("%w: %q is %s%s", ErrNoRuntime, name, why, fix)
	}
	return nil
}

// or returns a, or b when a is empty.
func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
