package swarm

import (
	"context"

	"github.com/moby/moby/client"
)

// swarmAPI is the part of the Docker client the backend uses: a swarm manager's
// services, tasks, nodes, networks, secrets and configs, and the container kernelbox
// runs in. *client.Client implements it.
type swarmAPI interface {
	Ping(ctx context.Context, options client.PingOptions) (client.PingResult, error)
	Info(ctx context.Context, options client.InfoOptions) (client.SystemInfoResult, error)
	ContainerInspect(ctx context.Context, id string, options client.ContainerInspectOptions) (client.ContainerInspectResult, error)

	ServiceCreate(ctx context.Context, options client.ServiceCreateOptions) (client.ServiceCreateResult, error)
	ServiceInspect(ctx context.Context, id string, options client.ServiceInspectOptions) (client.ServiceInspectResult, error)
	ServiceList(ctx context.Context, options client.ServiceListOptions) (client.ServiceListResult, error)
	ServiceRemove(ctx context.Context, id string, options client.ServiceRemoveOptions) (client.ServiceRemoveResult, error)
	ServiceLogs(ctx context.Context, id string, options client.ServiceLogsOptions) (client.ServiceLogsResult, error)
	TaskList(ctx context.Context, options client.TaskListOptions) (client.TaskListResult, error)
	NodeInspect(ctx context.Context, id string, options client.NodeInspectOptions) (client.NodeInspectResult, error)
	NodeList(ctx context.Context, options client.NodeListOptions) (client.NodeListResult, error)

	NetworkCreate(ctx context.Context, name string, options client.NetworkCreateOptions) (client.NetworkCreateResult, error)
	NetworkInspect(ctx context.Context, id string, options client.NetworkInspectOptions) (client.NetworkInspectResult, error)
	NetworkList(ctx context.Context, options client.NetworkListOptions) (client.NetworkListResult, error)
	NetworkConnect(ctx context.Context, id string, options client.NetworkConnectOptions) (client.NetworkConnectResult, error)
	NetworkDisconnect(ctx context.Context, id string, options client.NetworkDisconnectOptions) (client.NetworkDisconnectResult, error)
	NetworkRemove(ctx context.Context, id string, options client.NetworkRemoveOptions) (client.NetworkRemoveResult, error)

	SecretCreate(ctx context.Context, options client.SecretCreateOptions) (client.SecretCreateResult, error)
	SecretList(ctx context.Context, options client.SecretListOptions) (client.SecretListResult, error)
	SecretRemove(ctx context.Context, id string, options client.SecretRemoveOptions) (client.SecretRemoveResult, error)
	ConfigCreate(ctx context.Context, options client.ConfigCreateOptions) (client.ConfigCreateResult, error)
	ConfigList(ctx context.Context, options client.ConfigListOptions) (client.ConfigListResult, error)
	ConfigRemove(ctx context.Context, id string, options client.ConfigRemoveOptions) (client.ConfigRemoveResult, error)

	Close() error
}

var _ swarmAPI = (*client.Client)(nil)
