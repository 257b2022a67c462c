package permissions

// builtin is the Source of DefaultRules.
const builtin = "builtin"

// DefaultRules returns the built-in rules, each with Source "builtin", as a new slice:
//
//   - allow python.exec.stateful. The engine lets code run; keeping that code away
//     from the host is the backend's job (docker isolates it, local does not).
//   - allow filesystem.read of ${workdir}/** (the working directory and below).
//   - deny any capability on credentials and system secrets: SSH, cloud, GnuPG,
//     Kubernetes and Docker credentials under ${home}; .ssh and .gnupg directories,
//     .netrc, .git-credentials, .pgpass and private-key files (id_rsa*, id_ecdsa*,
//     id_ed25519*, id_dsa*, *.pem, *.key, *.p12, *.pfx) anywhere; /etc/shadow,
//     /etc/gshadow, /etc/sudoers and their kin, /etc/ssh, /etc/ssl/private,
//     /etc/kubernetes, mounted container secrets (/run/secrets), the Docker sockets,
//     and /proc, /sys and /dev.
//
// There is no blanket deny of /root: when kernelbox runs as root (as CI does) the
// working directory is often under /root, and a deny there would beat the workdir
// allow. /root's secrets are covered by the ${home} rules when root is the user and by
// the "anywhere" rules otherwise.
//
// Because deny beats allow, no rule in a policy file can re-open what these deny; a
// policy that must do so sets "defaults": false and lists its own rules.
func DefaultRules() []Rule {
	rules := []Rule{
		{Effect: Allow, Capability: PythonExecStateful, Reason: "running code is allowed; isolating it is the backend's job", Source: builtin},
		{Effect: Allow, Capability: FilesystemRead, Target: "${workdir}/**", Reason: "files in the working directory", Source: builtin},
	}
	deny := func(reason string, targets ...string) {
		for _, t := range targets {
			rules = append(rules, Rule{Effect: Deny, Capability: "*", Target: t, Reason: reason, Source: builtin})
		}
	}
	deny("SSH keys", "${home}/.ssh/**", "/**/.ssh/**", "/etc/ssh/**")
	deny("private keys",
		"/**/id_rsa*", "/**/id_dsa*", "/**/id_ecdsa*", "/**/id_ed25519*",
		"/**/*.pem", "/**/*.key", "/**/*.p12", "/**/*.pfx")
	deny("cloud credentials", "${home}/.aws/**", "${home}/.config/gcloud/**", "${home}/.azure/**")
	deny("GnuPG keys", "${home}/.gnupg/**", "/**/.gnupg/**")
	deny("Kubernetes credentials", "${home}/.kube/**", "/etc/kubernetes/**")
	deny("Docker credentials", "${home}/.docker/**")
	deny("stored passwords and tokens",
		"${home}/.netrc", "${home}/.git-credentials", "${home}/.pgpass",
		"/**/.netrc", "/**/.git-credentials", "/**/.pgpass",
		"${home}/.config/gh/**", "${home}/.pypirc", "${home}/.npmrc", "${home}/.vault-token",
		"${home}/.password-store/**", "${home}/.local/share/keyrings/**")
	deny("system secrets",
		"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
		"/etc/sudoers", "/etc/sudoers.d/**", "/etc/ssl/private/**", "/etc/krb5.keytab")
	deny("mounted container secrets", "/run/secrets/**", "/var/run/secrets/**")
	deny("the Docker socket", "/run/docker.sock", "/var/run/docker.sock", "/run/user/*/docker.sock")
	deny("kernel and device files", "/proc/**", "/sys/**", "/dev/**")
	return rules
}
