package docker

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// dockerAPI is the part of the Docker client the backend uses. Keeping it narrow
// shows at a glance what the backend asks of the daemon, and lets tests substitute a
// fake. *client.Client implements it.
type dockerAPI interface {
	Ping(ctx context.Context, options client.PingOptions) (client.PingResult, error)
	ImageInspect(ctx context.Context, image string, options ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ContainerCreate(ctx context.Context, options client.ContainerCreateOptions) (client.ContainerCreateResult, error)
	ContainerStart(ctx context.Context, id string, options client.ContainerStartOptions) (client.ContainerStartResult, error)
	ContainerWait(ctx context.Context, id string, options client.ContainerWaitOptions) client.ContainerWaitResult
	ContainerInspect(ctx context.Context, id string, options client.ContainerInspectOptions) (client.ContainerInspectResult, error)
	ContainerLogs(ctx context.Context, id string, options client.ContainerLogsOptions) (client.ContainerLogsResult, error)
	ContainerList(ctx context.Context, options client.ContainerListOptions) (client.ContainerListResult, error)
	ContainerRemove(ctx context.Context, id string, options client.ContainerRemoveOptions) (client.ContainerRemoveResult, error)
	Events(ctx context.Context, options client.EventsListOptions) client.EventsResult
	Close() error
}

var _ dockerAPI = (*client.Client)(nil)

// newClient connects to the daemon at host, or as the environment says when host is
// empty. The client negotiates the API version with the daemon on its first request
// (the default since moby/client v0.3; WithAPIVersionNegotiation is now a no-op), so
// Debian's engine, which speaks API 1.41, works.
func newClient(host string) (*client.Client, error) {
	opts := []client.Opt{client.FromEnv}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	c, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return c, nil
}

// isNotFound reports whether err says the container or image does not exist.
func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// shortID abbreviates a container id as the docker CLI does.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
