package docker

import (
	"path"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/serverflags"
)

// containerSpec is what one container needs beyond the backend's config.
type containerSpec struct {
	name    string // container name
	session string // session id, for the label
	dir     string // host path of the session directory, mounted at /workspace
	sockDir string // host path of the state directory, mounted read-only at /run/kernelbox
	data    []executor.DataMount
	imageID string        // when set, the image by id, whose shared libraries libs are
	libs    []mount.Mount // read-only (pylibMounts)
}

// server is where a container's Jupyter Server finds its launcher, kernelspec and
// token config: in the read-only state directory. Its socket is on the container's
// own /tmp tmpfs (containerSocket). The token is read from JUPYTER_CONFIG_DIR
// (writeTokenConfig); Args needs a non-empty one, which WithoutToken then drops.
var server = sandbox.Server{
	Launcher: path.Join(containerSocketDir, serverflags.LauncherName),
	Args: serverflags.WithoutToken(serverflags.Args(serverflags.Config{
		Socket:        containerSocket,
		Token:         "from-config-file",
		RootDir:       sandbox.Workspace,
		DefaultKernel: serverflags.KernelName,
		// Never root: kernelUser refuses uid 0.
		AllowRoot: false,
	})),
	ConfigDir:   path.Join(containerSocketDir, configDirName),
	JupyterPath: path.Join(containerSocketDir, kernelSpecDir),
}

// createOptions builds the create request for one container: c's hardened
// container (sandbox.Spec.Container) with the session and (read-only) state bind
// mounts, c's network and runtime, and labels plus the session's.
func createOptions(c config, labels map[string]string, s containerSpec) client.ContainerCreateOptions {
	mounts := []mount.Mount{
		{Type: mount.TypeBind, Source: s.dir, Target: sandbox.Workspace},
		// Read-only: nothing the kernel writes here could reach the host.
		{Type: mount.TypeBind, Source: s.sockDir, Target: containerSocketDir, ReadOnly: true},
	}
	for _, d := range s.data {
		mounts = append(mounts, mount.Mount{
			Type: mount.TypeBind, Source: d.HostDir, Target: path.Join(sandbox.Workspace, "data", d.Name), ReadOnly: true,
		})
	}
	mounts = append(mounts, s.libs...)
	cfg, hc := c.Container(server, labels)
	if s.imageID != "" {
		cfg.Image = s.imageID
	}
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	cfg.Labels[LabelSession] = s.session
	hc.NetworkMode = container.NetworkMode(c.network)
	hc.Runtime = c.runtime
	hc.Mounts = mounts
	return client.ContainerCreateOptions{Name: s.name, Config: cfg, HostConfig: hc}
}
