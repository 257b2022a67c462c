package permissions

// builtin is the Source of DefaultRules.
const builtin = "builtin"

// DefaultRules returns the built-in rules, each with Source "builtin", as a new slice:
//
//   - allow python.exec.stateful. The engine lets code run; keeping that code away
//     from the host is the backend's job (docker isolates it, local does not).
//   - allow filesystem.read of ${workdir}/** (the working directory and below).
//   - allow files.read and files.write: a client may download, list, upload and
//     delete a session's files through the files API, as it could before these
//     capabilities existed. They have no target, so the path denials below do not
//     reach them; the workspace keeps every such path inside its session. A
//     policy turns them off with a deny rule ({"effect": "deny", "capability":
//     "files.write"}), or by "defaults": false without an allow of its own.
//   - deny any capability on places that hold secrets: SSH, cloud, GnuPG,
//     Kubernetes and Docker credentials under ${home}; /etc/shadow, /etc/gshadow,
//     /etc/sudoers and their kin, /etc/ssh, /etc/ssl/private, /etc/kubernetes,
//     mounted container secrets (/run/secrets), the Docker sockets, and /proc,
//     /sys and /dev. No policy rule re-opens these.
//   - deny any capability on credential file names wherever they are (see
//     credentialRules), matching without regard to case. These are Overridable:
//     an allow rule naming one exact path re-opens that path, and nothing else.
//
// There is no blanket deny of /root: when kernelbox runs as root (as CI does) the
// working directory is often under /root, and a deny there would beat the workdir
// allow. /root's secrets are covered by the ${home} rules when root is the user and by
// the "anywhere" rules otherwise.
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
	deny("SSH keys", "${home}/.ssh/**", "/etc/ssh/**")
	deny("cloud credentials", "${home}/.aws/**", "${home}/.config/gcloud/**", "${home}/.azure/**")
	deny("GnuPG keys", "${home}/.gnupg/**")
	deny("Kubernetes credentials", "${home}/.kube/**", "/etc/kubernetes/**")
	deny("Docker credentials", "${home}/.docker/**")
	deny("stored passwords and tokens",
		"${home}/.config/gh/**", "${home}/.vault-token",
		"${home}/.password-store/**", "${home}/.local/share/keyrings/**")
	deny("system secrets",
		"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
		"/etc/sudoers", "/etc/sudoers.d/**", "/etc/ssl/private/**", "/etc/krb5.keytab")
	deny("mounted container secrets", "/run/secrets/**", "/var/run/secrets/**")
	deny("the Docker socket", "/run/docker.sock", "/var/run/docker.sock", "/run/user/*/docker.sock")
	deny("kernel and device files", "/proc/**", "/sys/**", "/dev/**")
	rules = append(rules,
		Rule{Effect: Allow, Capability: FilesRead, Reason: "clients may download and list session files", Source: builtin},
		Rule{Effect: Allow, Capability: FilesWrite, Reason: "clients may upload and delete session files", Source: builtin})
	return append(rules, credentialRules()...)
}

// credentialNames are the file and directory names that hold credentials, by the
// reason that names them in a denial. Each is matched as the last element(s) of a
// path anywhere ("/**/" is put in front), without regard to case. The list follows
// what secret scanners treat as secret files (gitleaks, detect-secrets,
// trufflehog's file rules) and the files the usual tools keep tokens in.
//
// Two choices are narrower than a scanner's, so that ordinary data stays readable:
// private SSH keys are the names ssh-keygen writes (id_rsa, id_dsa, id_ecdsa,
// id_ed25519, id_xmss and their _sk, .pub and renamed variants such as
// id_rsa_github or id_rsa.old), not every id_* (id_list.csv is data); and "secret"
// is matched as a whole word of a file name (secrets.yaml, db-secret.json,
// client_secret_123.json, app.secret; a secrets/ directory is left to the policy, as examples/policy.json asks about it), not as any substring
// (secretary.csv, secretion_rates.csv are data).
var credentialNames = []struct {
	reason string
	names  []string
}{
	{"SSH keys", []string{".ssh/**", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "id_xmss*", "*.ppk"}},
	{"private keys and keystores", []string{"*.pem", "*.key", "*.p12", "*.pfx", "*.p8", "*.pk8", "*.jks", "*.keystore", "*.keytab", "*.kdbx"}},
	{"environment files", []string{".env", ".env.*", "*.env"}},
	{"cloud credentials", []string{
		"credentials", "credentials.*", ".aws/**", ".config/gcloud/**", ".azure/**", ".s3cfg", ".boto",
		"*service-account*.json", "*service_account*.json", "*-key.json", "*_key.json", "gcp-key*.json"}},
	{"GnuPG keys", []string{".gnupg/**"}},
	{"Kubernetes credentials", []string{".kube/**", "kubeconfig", "*.kubeconfig"}},
	{"Docker credentials", []string{".docker/config.json", ".dockercfg"}},
	{"package registry tokens", []string{".npmrc", ".yarnrc", ".yarnrc.yml", ".pypirc", ".gem/credentials", ".cargo/credentials*"}},
	{"stored passwords and tokens", []string{
		".netrc", "_netrc", ".git-credentials", ".git/config", ".pgpass", ".my.cnf", ".mylogin.cnf",
		".htpasswd", ".vault-token", ".config/gh/**", ".password-store/**", ".terraformrc", "*.tfrc.json"}},
	{"secrets files", []string{
		"secret", "secrets", "secret.*", "secrets.*", "*.secret", "*.secrets",
		"*-secret.*", "*_secret.*", "*-secrets.*", "*_secrets.*", "client_secret*"}},
	{"Terraform state and variables", []string{"*.tfstate", "*.tfstate.*", "*.tfvars", "*.tfvars.json"}},
	{"shell and client histories", []string{".bash_history", ".zsh_history", ".psql_history", ".mysql_history", ".python_history"}},
}

// credentialRules returns the rules for credentialNames: deny everything,
// anywhere, case-insensitive, overridable by an exact allow.
func credentialRules() []Rule {
	var rules []Rule
	for _, g := range credentialNames {
		for _, n := range g.names {
			rules = append(rules, Rule{
				Effect: Deny, Capability: "*", Target: "/**/" + n, Reason: g.reason,
				IgnoreCase: true, Overridable: true, Source: builtin,
			})
		}
	}
	return rules
}
