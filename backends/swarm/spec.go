package swarm

import (
	"math"
	"path"
	"sort"
	"strconv"
	"time"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/serverflags"
)

// Where things are inside a task. The launcher and the kernelspec are swarm configs
// (read-only files), the token config is the session's swarm secret, /workspace and
// /tmp are tmpfs mounts on a read-only root.
const (
	stateDir      = "/run/kernelbox"
	launcherPath  = stateDir + "/" + serverflags.LauncherName
	jupyterPath   = stateDir + "/jupyter"
	secretsDir    = "/run/secrets"
	tokenFile     = "jupyter_server_config.json"
	workspaceDir  = "/workspace"
	resolvConf    = "/etc/resolv.conf"
	noResolver    = "# kernelbox: no DNS resolver for kernels (their network is their session's alone)\n"
	killGrace     = 10 // seconds `timeout` waits after SIGTERM at the max lifetime
	exitNoNewPriv = 97 // the task's exit code when its daemon lacks no-new-privileges
)

// nnpCheck runs first in every task: a daemon without "no-new-privileges": true
// would start the task with NoNewPrivs 0 (Engine 20.10 drops the service spec's
// field), so the task refuses to run at all and says why; Open reports it with
// the node's name.
const nnpCheck = `grep -q '^NoNewPrivs:[[:space:]]*1$' /proc/self/status || {
  echo "kernelbox: refusing to start: NoNewPrivs is not set; this node's Docker daemon needs \"no-new-privileges\": true in its daemon.json" >&2
  exit 97
}
exec "$@"`

// sessionObjects names what one session owns on the swarm.
type sessionObjects struct {
	name    string // service and network name, kernelbox-<key>
	session string
	network string // network id
	secret  string // secret id
}

// serviceSpec builds the session's service: one replica that is never restarted,
// dnsrr, on the session's network only, with every hardening field Engine 20.10
// honours in a service spec.
func (b *Backend) serviceSpec(o sessionObjects, c config) swarm.ServiceSpec {
	labels := b.labels(o.session)
	one := uint64(1)
	init := true
	secs := int64(math.Ceil(c.lifetime.Seconds()))
	args := serverflags.WithoutToken(serverflags.Args(serverflags.Config{
		IP: "0.0.0.0", Port: serverPort,
		Token:         "from-secret", // the token comes from the secret (JUPYTER_CONFIG_DIR)
		RootDir:       workspaceDir,
		DefaultKernel: serverflags.KernelName,
	}))
	cmd := append([]string{"sh", "-c", nnpCheck, "kernelbox-task",
		"timeout", "-k", strconv.Itoa(killGrace), strconv.FormatInt(secs, 10),
		c.python, "-Xfrozen_modules=off", launcherPath}, args...)
	uid := strconv.Itoa(c.uid)
	tmp := func(target string, size int64) mount.Mount {
		return mount.Mount{Type: mount.TypeTmpfs, Target: target, TmpfsOptions: &mount.TmpfsOptions{SizeBytes: size, Mode: 0o1777}}
	}
	grace := 5 * time.Second
	spec := swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: o.name, Labels: labels},
		Mode:        swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &one}},
		// dnsrr: this kind of kernel lacks IP_VS, so VIP mode times out; nothing
		// is published through the routing mesh.
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{
				Image:           c.image,
				Labels:          labels,
				Command:         cmd,
				Hostname:        "kernel",
				Env:             append(taskEnv(), c.env...),
				Dir:             workspaceDir,
				User:            c.user,
				Init:            &init,
				ReadOnly:        true,
				CapabilityDrop:  []string{"ALL"},
				StopGracePeriod: &grace,
				Mounts:          []mount.Mount{tmp("/tmp", c.tmpSize), tmp(workspaceDir, c.workSize)},
				Secrets: []*swarm.SecretReference{{
					SecretID: o.secret, SecretName: o.name + "-token",
					File: &swarm.SecretReferenceFileTarget{Name: tokenFile, UID: uid, GID: "0", Mode: 0o400},
				}},
				Configs: []*swarm.ConfigReference{
					b.configRef(b.launcher, launcherPath),
					b.configRef(b.kernelspec, path.Join(jupyterPath, "kernels", serverflags.KernelName, "kernel.json")),
					// Over the engine's own resolv.conf, which names its embedded
					// resolver (CVE-2024-29018: 20.10 forwards from internal
					// networks when the node's resolver is on loopback).
					b.configRef(b.resolv, resolvConf),
				},
			},
			Resources: &swarm.ResourceRequirements{
				Limits:       &swarm.Limit{NanoCPUs: c.nanoCPUs, MemoryBytes: c.memory, Pids: c.pids},
				Reservations: &swarm.Resources{NanoCPUs: c.reserveCPU, MemoryBytes: c.reserveMemory},
			},
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionNone},
			Placement:     &swarm.Placement{Constraints: c.constraints},
			Networks:      []swarm.NetworkAttachmentConfig{{Target: o.network}},
			LogDriver:     &swarm.Driver{Name: "json-file", Options: map[string]string{"max-size": "10m", "max-file": "2"}},
		},
	}
	return spec
}

// configRef mounts one of the backend's configs read-only at target.
func (b *Backend) configRef(cf swarmConfig, target string) *swarm.ConfigReference {
	return &swarm.ConfigReference{
		ConfigID: cf.id, ConfigName: cf.name,
		File: &swarm.ConfigReferenceFileTarget{Name: target, UID: "0", GID: "0", Mode: 0o444},
	}
}

// withTemplate returns c with a session template's task fields applied: its
// image, limits, max lifetime and environment where it sets them. The executor
// has checked the names of the template's variables, and the caps on its limits
// are checked where templates are loaded.
func (c config) withTemplate(t executor.Template) config {
	if t.Image != "" {
		c.image = t.Image
	}
	if t.Memory > 0 {
		c.memory = t.Memory
	}
	if t.CPUs > 0 {
		c.nanoCPUs = int64(t.CPUs * 1e9)
	}
	if t.Pids > 0 {
		c.pids = t.Pids
	}
	if t.MaxLifetime > 0 {
		c.lifetime = t.MaxLifetime
	}
	keys := make([]string, 0, len(t.Env))
	for k := range t.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	c.env = nil
	for _, k := range keys {
		c.env = append(c.env, k+"="+t.Env[k])
	}
	return c
}

// taskEnv is the task's environment; like the docker backend's, everything written at
// run time goes to the /tmp tmpfs, and nothing in it is secret.
func taskEnv() []string {
	return []string{
		"HOME=/tmp",
		"XDG_CACHE_HOME=/tmp/.cache",
		"JUPYTER_RUNTIME_DIR=/tmp/.jupyter/runtime",
		"JUPYTER_DATA_DIR=/tmp/.jupyter/data",
		"JUPYTER_CONFIG_DIR=" + secretsDir,
		"JUPYTER_PATH=" + jupyterPath,
		"IPYTHONDIR=/tmp/.ipython",
		"MPLCONFIGDIR=/tmp/.config/matplotlib",
		"MPLBACKEND=module://matplotlib_inline.backend_inline",
		"PYTHONUNBUFFERED=1",
		"PYDEVD_DISABLE_FILE_VALIDATION=1",
	}
}
