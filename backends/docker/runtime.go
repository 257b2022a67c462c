package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/internal/dockerapi"
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
	c, err := dockerapi.NewClient(host)
	if err != nil {
		return nil, "", err
	}
	defer c.Close()
	return daemonRuntimes(ctx, c)
}

// infoAPI is the one call daemonRuntimes needs.
type infoAPI interface {
	Info(ctx context.Context, options client.InfoOptions) (client.SystemInfoResult, error)
}

// daemonRuntimes asks the daemon for its runtimes, sorted, and its default.
func daemonRuntimes(ctx context.Context, api infoAPI) ([]string, string, error) {
	r, err := api.Info(ctx, client.InfoOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("docker info: %w", err)
	}
	var names []string
	for n := range r.Info.Runtimes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, r.Info.DefaultRuntime, nil
}

// checkRuntime returns an error wrapping ErrNoRuntime unless name is "" or one of
// known.
func checkRuntime(name string, known []string) error {
	if name == "" || slices.Contains(known, name) {
		return nil
	}
	hint := ""
	if name == RuntimeGVisor {
		hint = "; register gVisor with `scripts/setup.sh --gvisor` (installs Debian's runsc, adds it to /etc/docker/daemon.json, reloads dockerd)"
	}
	return fmt.Errorf("%w: %q (the daemon knows %s)%s", ErrNoRuntime, name, strings.Join(known, ", "), hint)
}

// or returns a, or b when a is empty.
func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
