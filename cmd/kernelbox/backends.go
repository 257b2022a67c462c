package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/kernelbox/kernelbox/backends/docker"
	"github.com/kernelbox/kernelbox/backends/local"
	"github.com/kernelbox/kernelbox/backends/none"
	"github.com/kernelbox/kernelbox/executor"
)

// newBackend maps a backend name to its constructor. This is the one place backends
// are wired; none registers itself.
func newBackend(ctx context.Context, f *engineFlags, log *slog.Logger) (executor.Backend, error) {
	switch f.backend {
	case "none", "":
		return none.New(), nil
	case "local":
		b, err := local.New(local.Options{Python: f.python, Logger: log})
		if err != nil {
			return nil, err
		}
		log.Warn("backend local: code runs UNSANDBOXED with this user's rights; use --backend docker for untrusted code")
		return b, nil
	case "docker":
		return docker.New(ctx, docker.Options{Image: f.image, Memory: f.sessionMemory, Logger: log})
	case "remote":
		return f.remote.newRemote(ctx, log) // remote.go
	case "swarm":
		return f.swarm.newSwarm(ctx, f, log) // swarm.go
	default:
		return nil, fmt.Errorf("unknown backend %q: use none, local, docker, remote or swarm", f.backend)
	}
}
