package permissions

import (
	"strings"
	"testing"
)

func TestDefaultRules(t *testing.T) {
	t.Parallel()
	rules := DefaultRules()
	for i, r := range rules {
		if r.Source != "builtin" {
			t.Errorf("rule %d (%v): Source = %q, want builtin", i, r, r.Source)
		}
		if r.Reason == "" {
			t.Errorf("rule %d (%v): no reason", i, r)
		}
		if err := r.Validate(); err != nil {
			t.Errorf("rule %d (%v): %v", i, r, err)
		}
	}
	rules[0].Effect = Deny
	if DefaultRules()[0].Effect != Allow {
		t.Fatal("DefaultRules returned shared state")
	}
}

// TestDefaultDecisions checks the built-in rules with a fake home and working
// directory; Evaluate is pure, so the paths need not exist.
func TestDefaultDecisions(t *testing.T) {
	t.Parallel()
	const home, work = "/fake/home/u", "/fake/home/u/project"
	vars := Vars{Workdir: work, Home: home, Artifacts: "/fake/artifacts"}
	broad := Rule{Effect: Allow, Capability: "*", Target: "/**", Reason: "everything", Source: "test"}
	tests := []struct {
		name   string
		capab  string
		target string
		vars   Vars
		extra  []Rule
		want   Effect
		reason string
	}{
		{name: "exec", capab: PythonExecStateful, want: Allow, reason: "isolating it is the backend's job"},
		{name: "files read", capab: FilesRead, want: Allow, reason: "download and list session files"},
		{name: "files write", capab: FilesWrite, want: Allow, reason: "upload and delete session files"},
		{name: "workdir file", target: work + "/data.csv", want: Allow, reason: "files in the working directory"},
		{name: "workdir itself", target: work, want: Allow},
		{name: "workdir subdir", target: work + "/a/b/c.parquet", want: Allow},
		{name: "sibling of workdir", target: work + "2/data.csv", want: Ask},
		{name: "home file", target: home + "/notes.txt", want: Ask},
		{name: "outside", target: "/opt/data.csv", want: Ask},
		{name: "ssh key", target: home + "/.ssh/id_ed25519", want: Deny, reason: "SSH keys"},
		{name: "ssh config", target: home + "/.ssh/config", want: Deny, reason: "SSH keys"},
		{name: "ssh dir", target: home + "/.ssh", want: Deny},
		{name: "aws", target: home + "/.aws/credentials", want: Deny, reason: "cloud credentials"},
		{name: "gcloud", target: home + "/.config/gcloud/application_default_credentials.json", want: Deny},
		{name: "gnupg", target: home + "/.gnupg/private-keys-v1.d/x.key", want: Deny},
		{name: "kube", target: home + "/.kube/config", want: Deny, reason: "Kubernetes"},
		{name: "docker config", target: home + "/.docker/config.json", want: Deny, reason: "Docker credentials"},
		{name: "netrc", target: home + "/.netrc", want: Deny},
		{name: "git credentials", target: home + "/.git-credentials", want: Deny},
		{name: "gh token", target: home + "/.config/gh/hosts.yml", want: Deny},
		{name: "shadow", target: "/etc/shadow", want: Deny, reason: `denied by rule "system secrets" (builtin)`},
		{name: "shadow backup", target: "/etc/shadow-", want: Deny},
		{name: "gshadow", target: "/etc/gshadow", want: Deny},
		{name: "sudoers", target: "/etc/sudoers", want: Deny},
		{name: "sudoers.d", target: "/etc/sudoers.d/90-cloud", want: Deny},
		{name: "ssh host key", target: "/etc/ssh/ssh_host_ed25519_key", want: Deny},
		{name: "passwd is not a secret", target: "/etc/passwd", want: Ask},
		{name: "proc", target: "/proc/self/environ", want: Deny, reason: "kernel and device files"},
		{name: "proc itself", target: "/proc", want: Deny},
		{name: "sys", target: "/sys/kernel/notes", want: Deny},
		{name: "dev", target: "/dev/mem", want: Deny},
		{name: "docker socket", target: "/run/docker.sock", want: Deny, reason: "Docker socket"},
		{name: "docker socket var", target: "/var/run/docker.sock", want: Deny},
		{name: "rootless docker socket", target: "/run/user/1000/docker.sock", want: Deny},
		{name: "k8s token", target: "/var/run/secrets/kubernetes.io/serviceaccount/token", want: Deny},
		{name: "pem in workdir", target: work + "/certs/server.pem", want: Deny, reason: "private keys"},
		{name: "key in workdir", target: work + "/tls.key", want: Deny},
		{name: "id_rsa in workdir", target: work + "/id_rsa", want: Deny},
		{name: "id_rsa.pub in workdir", target: work + "/backup/id_rsa.pub", want: Deny},
		{name: ".ssh in workdir", target: work + "/.ssh/authorized_keys", want: Deny},
		{name: "other user's ssh", target: "/home/other/.ssh/id_rsa", want: Deny},
		{name: "root's ssh", target: "/root/.ssh/known_hosts", want: Deny},
		{name: "netrc in workdir", target: work + "/.netrc", want: Deny},
		// The workdir allow survives a workdir under /root: there is no blanket /root deny.
		{name: "workdir under root", target: "/root/project/data.csv", vars: Vars{Workdir: "/root/project", Home: "/root"}, want: Allow},
		{name: "root's aws with root home", target: "/root/.aws/credentials", vars: Vars{Workdir: "/root/project", Home: "/root"}, want: Deny},
		// Denials hold against a broader allow.
		{name: "broad allow opens the rest", target: "/opt/data.csv", extra: []Rule{broad}, want: Allow},
		{name: "broad allow does not open shadow", target: "/etc/shadow", extra: []Rule{broad}, want: Deny, reason: `deny beats the matching rule "everything" (test)`},
		{name: "broad allow does not open ssh", target: home + "/.ssh/id_rsa", extra: []Rule{broad}, want: Deny},
		{name: "broad allow does not open proc", target: "/proc/1/environ", extra: []Rule{broad}, want: Deny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := vars
			if tt.vars != (Vars{}) {
				v = tt.vars
			}
			name := tt.capab
			if name == "" {
				name = FilesystemRead
			}
			p := Policy{Rules: append(DefaultRules(), tt.extra...)}
			d := p.Evaluate(ResolvedCapability{Name: name, Requested: tt.target, Target: tt.target}, v)
			if d.Effect != tt.want || !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("Evaluate = %s; want %v with reason containing %q", d, tt.want, tt.reason)
			}
		})
	}
}
