package docker

import (
	"context"
	"fmt"

	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
)

// DaemonMemory returns the memory, in bytes, of the machine the Docker daemon at
// host runs containers on (its MemTotal), which is what the containers' memory
// limits share. host is as for [Options.DockerHost]; "" means the environment's.
func DaemonMemory(ctx context.Context, host string) (int64, error) {
	c, err := dockerapi.NewClient(host)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	r, err := c.Info(ctx, client.InfoOptions{})
	if err != nil {
		return 0, fmt.Errorf("docker info: %w", err)
	}
	if r.Info.MemTotal <= 0 {
		return 0, fmt.Errorf("docker info: the daemon reports no memory total")
	}
	return r.Info.MemTotal, nil
}
