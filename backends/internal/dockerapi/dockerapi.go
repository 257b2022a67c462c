// Package dockerapi holds what the docker and swarm backends share of talking to a
// Docker daemon: connecting, reading its errors, naming its objects.
package dockerapi

import (
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// NewClient connects to the daemon at host, or as the environment says when host
// is empty. The client negotiates the API version with the daemon on its first
// request (the default since moby/client v0.3), so Debian's engine, which speaks
// API 1.41, works.
func NewClient(host string) (*client.Client, error) {
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

// IsNotFound reports whether err says the object (container, image, service,
// network, secret, config) does not exist.
func IsNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// IsConflict reports whether err says the request conflicts with the object's
// state, for example a removal of a container that another removal is already
// at.
func IsConflict(err error) bool { return cerrdefs.IsConflict(err) }

// Short abbreviates a container, service or node id as the docker CLI does.
func Short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
