package docker

import (
	"fmt"
	"math"
	"path"
	"strconv"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

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
}

// killGrace is how long `timeout` waits after SIGTERM at the max lifetime before it
// sends SIGKILL.
const killGrace = 10

// serverCommand is the container's whole command line: Jupyter Server under a hard
// `timeout`, so the container stops itself at its max lifetime even when nobody is
// left to stop it. -Xfrozen_modules=off keeps debugpy (in ipykernel) from warning on
// every start.
func serverCommand(c config) []string {
	secs := int64(math.Ceil(c.lifetime.Seconds()))
	cmd := []string{
		"timeout", "-k", strconv.Itoa(killGrace), strconv.FormatInt(secs, 10),
		c.python, "-Xfrozen_modules=off", path.Join(containerSocketDir, serverflags.LauncherName),
	}
	// The token is read from JUPYTER_CONFIG_DIR (writeTokenConfig); Args needs a
	// non-empty one, which withoutToken then drops.
	return append(cmd, serverflags.WithoutToken(serverflags.Args(serverflags.Config{
		Socket:        containerSocket,
		Token:         "from-config-file",
		RootDir:       workspaceDir,
		DefaultKernel: serverflags.KernelName,
		// Never root: kernelUser refuses uid 0.
		AllowRoot: false,
	}))...)
}

// containerEnv is the container's environment. The root file system is read-only, so
// everything Jupyter, IPython and matplotlib write at run time goes to the /tmp tmpfs.
func containerEnv(c config) []string {
	env := []string{
		"HOME=/tmp",
		"XDG_CACHE_HOME=/tmp/.cache",
		"JUPYTER_RUNTIME_DIR=/tmp/.jupyter/runtime",
		"JUPYTER_DATA_DIR=/tmp/.jupyter/data",
		// Read-only for the kernel: holds the server's token (writeTokenConfig).
		"JUPYTER_CONFIG_DIR=" + path.Join(containerSocketDir, configDirName),
		// kernelbox's kernelspec, written beside the server's launcher.
		"JUPYTER_PATH=" + path.Join(containerSocketDir, kernelSpecDir),
		"IPYTHONDIR=/tmp/.ipython",
		"MPLCONFIGDIR=/tmp/.config/matplotlib",
		// Inline figures: plots come back as display data (and artifacts).
		"MPLBACKEND=module://matplotlib_inline.backend_inline",
		"PYTHONUNBUFFERED=1",
		"PYDEVD_DISABLE_FILE_VALIDATION=1",
	}
	return append(env, c.env...)
}

// createOptions builds the create request for one container: every hardening setting
// of c, the session and (read-only) state bind mounts, and the labels.
func createOptions(c config, labels map[string]string, s containerSpec) client.ContainerCreateOptions {
	mounts := []mount.Mount{
		{Type: mount.TypeBind, Source: s.dir, Target: workspaceDir},
		// Read-only: nothing the kernel writes here could reach the host.
		{Type: mount.TypeBind, Source: s.sockDir, Target: containerSocketDir, ReadOnly: true},
	}
	for _, d := range s.data {
		mounts = append(mounts, mount.Mount{
			Type: mount.TypeBind, Source: d.HostDir, Target: path.Join(workspaceDir, "data", d.Name), ReadOnly: true,
		})
	}

	tmpfs := "rw,exec,nosuid,nodev,mode=1777"
	if c.tmpSize > 0 {
		tmpfs += ",size=" + strconv.FormatInt(c.tmpSize, 10)
	}

	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(c.network),
		CapDrop:        []string{"ALL"},
		CapAdd:         c.capAdd,
		ReadonlyRootfs: !c.writableRoot,
		Tmpfs:          map[string]string{"/tmp": tmpfs},
		Init:           &c.init,
		Runtime:        c.runtime,
		Mounts:         mounts,
		// Bounded logs: the kernel's own stderr lands here for the container's life.
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "10m", "max-file": "2"}},
		Resources: container.Resources{
			Memory:   c.memory,
			NanoCPUs: c.nanoCPUs,
		},
	}
	if c.memory > 0 {
		// memory+swap equal to memory: no swap, so a runaway kernel is OOM-killed
		// promptly instead of thrashing.
		hc.MemorySwap = c.memory
	}
	if c.pidsLimit > 0 {
		hc.PidsLimit = &c.pidsLimit
	} else {
		unlimited := int64(-1)
		hc.PidsLimit = &unlimited
	}
	if !c.newPrivs {
		hc.SecurityOpt = []string{"no-new-privileges:true"}
	}

	allLabels := map[string]string{LabelSession: s.session}
	for k, v := range labels {
		allLabels[k] = v
	}
	return client.ContainerCreateOptions{
		Name: s.name,
		Config: &container.Config{
			Image: c.image,
			User:  fmt.Sprintf("%d:%d", c.uid, c.gid),
			// The whole command as the entrypoint, so that an image's ENTRYPOINT
			// cannot wrap the server; with an entrypoint given, the daemon does
			// not append the image's CMD either.
			Entrypoint: serverCommand(c),
			Env:        containerEnv(c),
			WorkingDir: workspaceDir,
			Labels:     allLabels,
		},
		HostConfig: hc,
	}
}
