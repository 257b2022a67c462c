package swarm

import (
	"path"
	"strconv"
	"time"

	"github.com/moby/moby/api/types/swarm"

	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
	"github.com/kernelbox/kernelbox/internal/serverflags"
)

// Where things are inside a task. The launcher and the kernelspec are swarm configs
// (read-only files), the token config is the session's swarm secret, /workspace and
// /tmp are tmpfs mounts on a read-only root.
const (
	stateDir     = "/run/kernelbox"
	launcherPath = stateDir + "/" + serverflags.LauncherName
	jupyterPath  = stateDir + "/jupyter"
	secretsDir   = "/run/secrets"
	tokenFile    = "jupyter_server_config.json"
	resolvConf   = "/etc/resolv.conf"
	noResolver   = "# kernelbox: no DNS resolver for kernels (their network is their session's alone)\n"
)

// server is where a task's Jupyter Server finds its launcher and kernelspec (swarm
// configs) and its token (the session's secret, as JUPYTER_CONFIG_DIR); it listens
// on the task's overlay address.
var server = sandbox.Server{
	Launcher: launcherPath,
	Args: serverflags.WithoutToken(serverflags.Args(serverflags.Config{
		IP: "0.0.0.0", Port: serverPort,
		Token:         "from-secret", // the token comes from the secret (JUPYTER_CONFIG_DIR)
		RootDir:       sandbox.Workspace,
		DefaultKernel: serverflags.KernelName,
	})),
	ConfigDir:   secretsDir,
	JupyterPath: jupyterPath,
}

// sessionObjects names what one session owns on the swarm.
type sessionObjects struct {
	name    string // service and network name, kernelbox-<key>
	session string
	network string // network id
	secret  string // secret id
	// caBundle is the CA bundle's config for a template with secrets
	// (secrets.go); no id otherwise.
	caBundle swarmConfig
}

// serviceSpec builds the session's service: c's hardened task (sandbox.Spec.Task)
// with a tmpfs at /workspace, the token secret and the backend's configs, one
// replica that is never restarted, dnsrr, on the session's network only.
func (b *Backend) serviceSpec(o sessionObjects, c config) swarm.ServiceSpec {
	labels := b.labels(o.session)
	one := uint64(1)
	grace := 5 * time.Second
	task := c.Task(server, labels)
	cs := task.ContainerSpec
	cs.Hostname = "kernel"
	cs.StopGracePeriod = &grace
	cs.Mounts = append(cs.Mounts, sandbox.TmpfsMount(sandbox.Workspace, c.workSize))
	cs.Secrets = []*swarm.SecretReference{{
		SecretID: o.secret, SecretName: o.name + "-token",
		File: &swarm.SecretReferenceFileTarget{Name: tokenFile, UID: strconv.Itoa(c.UID), GID: "0", Mode: 0o400},
	}}
	cs.Configs = []*swarm.ConfigReference{
		b.configRef(b.launcher, launcherPath),
		b.configRef(b.kernelspec, path.Join(jupyterPath, "kernels", serverflags.KernelName, "kernel.json")),
		// Over the engine's own resolv.conf, which names its embedded
		// resolver (CVE-2024-29018: 20.10 forwards from internal
		// networks when the node's resolver is on loopback).
		b.configRef(b.resolv, resolvConf),
	}
	if o.caBundle.id != "" {
		cs.Configs = append(cs.Configs, b.configRef(o.caBundle, caBundlePath))
	}
	task.Resources.Reservations = &swarm.Resources{NanoCPUs: c.reserveCPU, MemoryBytes: c.reserveMemory}
	task.RestartPolicy = &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionNone}
	task.Placement = &swarm.Placement{Constraints: c.constraints}
	task.Networks = []swarm.NetworkAttachmentConfig{{Target: o.network}}
	return swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: o.name, Labels: labels},
		Mode:        swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &one}},
		// dnsrr: this kind of kernel lacks IP_VS, so VIP mode times out; nothing
		// is published through the routing mesh.
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR},
		TaskTemplate: task,
	}
}

// configRef mounts one of the backend's configs read-only at target.
func (b *Backend) configRef(cf swarmConfig, target string) *swarm.ConfigReference {
	return &swarm.ConfigReference{
		ConfigID: cf.id, ConfigName: cf.name,
		File: &swarm.ConfigReferenceFileTarget{Name: target, UID: "0", GID: "0", Mode: 0o444},
	}
}
