package permissions

import (
	"strings"
	"testing"
)

// TestCredentialNames checks that the default policy denies each credential file
// name wherever it is, in any case, naming the rule; and that ordinary data next to
// them stays allowed.
func TestCredentialNames(t *testing.T) {
	t.Parallel()
	const work = "/fake/home/u/project"
	vars := Vars{Workdir: work, Home: "/fake/home/u", Artifacts: "/fake/artifacts"}
	denied := map[string][]string{
		"SSH keys": {"id_rsa", "Id_Rsa", "ID_RSA", "id_rsa.pub", "id_rsa_github", "id_dsa", "id_ecdsa", "id_ecdsa_sk",
			"id_ed25519", "id_ed25519_sk.pub", "id_xmss", "putty.ppk", ".ssh/config", ".SSH/authorized_keys", ".ssh"},
		"private keys and keystores": {"server.pem", "SERVER.PEM", "tls.key", "Tls.Key", "cert.p12", "cert.pfx",
			"AuthKey_ABC.p8", "k.pk8", "app.jks", "release.keystore", "krb5.keytab", "vault.kdbx"},
		"environment files": {".env", ".ENV", ".env.local", ".env.production", ".env.example", "prod.env", "App.ENV"},
		"cloud credentials": {"credentials", "CREDENTIALS", "credentials.json", ".aws/credentials", ".aws/config",
			".AWS/Config", ".config/gcloud/application_default_credentials.json", ".azure/accessTokens.json",
			".s3cfg", ".boto", "gcp-key.json", "GCP-KEY.JSON", "service-account.json", "my-service-account-123.json",
			"service_account.json", "sa-key.json", "deploy_key.json"},
		"GnuPG keys":             {".gnupg/pubring.kbx", ".gnupg"},
		"Kubernetes credentials": {".kube/config", ".KUBE/CONFIG", "kubeconfig", "prod.kubeconfig"},
		"Docker credentials":     {".docker/config.json", ".Docker/Config.json", ".dockercfg"},
		"package registry tokens": {".npmrc", ".NPMRC", ".yarnrc", ".yarnrc.yml", ".pypirc", ".gem/credentials",
			".cargo/credentials.toml"},
		"stored passwords and tokens": {".netrc", "_netrc", "_NETRC", ".git-credentials", ".git/config", ".GIT/CONFIG",
			".pgpass", ".my.cnf", ".mylogin.cnf", ".htpasswd", ".vault-token", ".config/gh/hosts.yml",
			".password-store/x.gpg", ".terraformrc", "credentials.tfrc.json"},
		"secrets files": {"secret", "secrets", "secrets.yaml", "Secrets.YML", "secrets.json", "secret.toml",
			"app.secret", "db.secrets", "db-secret.yaml", "db_secret.json", "k8s-secrets.yaml", "my_secrets.env",
			"client_secret_123.apps.googleusercontent.com.json"},
		"Terraform state and variables": {"terraform.tfstate", "terraform.tfstate.backup", "prod.tfvars",
			"prod.tfvars.json", "TERRAFORM.TFSTATE"},
		"shell and client histories": {".bash_history", ".zsh_history", ".psql_history", ".mysql_history", ".python_history"},
	}
	dirs := []string{work, work + "/nested/deep", "/opt/elsewhere", "/tmp"}
	for reason, names := range denied {
		for _, name := range names {
			for _, dir := range dirs {
				target := dir + "/" + name
				t.Run(target, func(t *testing.T) {
					t.Parallel()
					d := DefaultPolicy().Evaluate(ResolvedCapability{Name: FilesystemRead, Requested: target, Target: target}, vars)
					want := `rule "` + reason + `" (builtin)`
					if d.Effect != Deny || !strings.HasPrefix(d.Reason, "denied by") || !strings.Contains(d.Reason, want) {
						t.Errorf("Evaluate = %s; want deny %s", d, want)
					}
				})
			}
		}
	}
	allowed := []string{"data.csv", "keyboard.csv", "monkey.py", "report.pdf", "id_list.csv", "id_map.json",
		"identity.txt", "secretary.csv", "secretion_rates.csv", "environment.yml", "env.py", "keys.csv",
		"monkey.json", "credential_stuffing_paper.pdf", "config", "git/config", "docker/config.json",
		"ssh_notes.md", "tfstate_notes.md", "pem_files.txt", "key_points.md", "secrets/token.txt"}
	for _, name := range allowed {
		target := work + "/nested/" + name
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			d := DefaultPolicy().Evaluate(ResolvedCapability{Name: FilesystemRead, Requested: target, Target: target}, vars)
			if d.Effect != Allow {
				t.Errorf("Evaluate = %s; want allow", d)
			}
		})
	}
}

// TestCredentialOverride checks the two tiers: an explicit allow of one exact path
// re-opens a credential name there and nowhere else; globs do not; a user's deny and
// the built-in location rules still win.
func TestCredentialOverride(t *testing.T) {
	t.Parallel()
	const home, work = "/fake/home/u", "/fake/home/u/project"
	vars := Vars{Workdir: work, Home: home}
	fixture := work + "/tests/fixtures/server.pem"
	tests := []struct {
		name   string
		policy string
		target string
		want   Effect
		reason string
	}{
		{"exact allow", `{"rules":[{"effect":"allow","capability":"filesystem.read","target":"${workdir}/tests/fixtures/server.pem","reason":"test fixture"}]}`,
			fixture, Allow, `allowed by rule "files in the working directory" (builtin), rule "test fixture" (p.json rule 1); an allow of this exact path overrides rule "private keys and keystores" (builtin)`},
		{"exact allow, absolute", `{"rules":[{"effect":"allow","capability":"*","target":"` + fixture + `"}]}`, fixture, Allow, "overrides"},
		{"exact allow covers only its path", `{"rules":[{"effect":"allow","capability":"filesystem.read","target":"${workdir}/tests/fixtures/server.pem"}]}`,
			work + "/tests/fixtures/client.pem", Deny, "private keys"},
		{"exact allow is byte-exact", `{"rules":[{"effect":"allow","capability":"filesystem.read","target":"${workdir}/tests/fixtures/server.pem"}]}`,
			work + "/tests/fixtures/SERVER.PEM", Deny, "private keys"},
		{"glob allow does not override", `{"rules":[{"effect":"allow","capability":"filesystem.read","target":"${workdir}/tests/fixtures/*.pem"}]}`,
			fixture, Deny, "private keys"},
		{"broad allow does not override", `{"rules":[{"effect":"allow","capability":"*","target":"/**"}]}`, fixture, Deny, "deny beats"},
		{"user deny beats exact allow", `{"rules":[{"effect":"allow","capability":"*","target":"` + fixture + `"},{"effect":"deny","capability":"*","target":"${workdir}/tests/**","reason":"no tests"}]}`,
			fixture, Deny, `denied by rule "no tests" (p.json rule 2)`},
		{"user ask still asks", `{"rules":[{"effect":"allow","capability":"*","target":"` + fixture + `"},{"effect":"ask","capability":"*","target":"${workdir}/tests/**"}]}`,
			fixture, Ask, "approval required"},
		{"home ssh is not overridable", `{"rules":[{"effect":"allow","capability":"*","target":"${home}/.ssh/id_rsa"}]}`,
			home + "/.ssh/id_rsa", Deny, "SSH keys"},
		{"shadow is not overridable", `{"rules":[{"effect":"allow","capability":"*","target":"/etc/shadow"}]}`,
			"/etc/shadow", Deny, "system secrets"},
		{"env in workdir, exact", `{"rules":[{"effect":"allow","capability":"filesystem.read","target":"${workdir}/.env.example"}]}`,
			work + "/.env.example", Allow, `overrides rule "environment files" (builtin)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := ParsePolicy(strings.NewReader(tt.policy), "p.json")
			if err != nil {
				t.Fatal(err)
			}
			d := p.Evaluate(ResolvedCapability{Name: FilesystemRead, Requested: tt.target, Target: tt.target}, vars)
			if d.Effect != tt.want || !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("Evaluate = %s; want %v with reason containing %q", d, tt.want, tt.reason)
			}
		})
	}
}

// TestIgnoreCaseRule checks ignore_case in a policy file.
func TestIgnoreCaseRule(t *testing.T) {
	t.Parallel()
	p, err := ParsePolicy(strings.NewReader(`{"defaults":false,"rules":[{"effect":"allow","capability":"*","target":"/data/**"},{"effect":"deny","capability":"*","target":"/data/**/*.secret.csv","ignore_case":true,"reason":"marked secret"}]}`), "p.json")
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]Effect{"/data/a/X.SECRET.CSV": Deny, "/DATA/x.secret.csv": Deny, "/DATA/x.csv": Ask, "/data/x.csv": Allow} {
		d := p.Evaluate(ResolvedCapability{Name: FilesystemRead, Target: target}, Vars{})
		if d.Effect != want {
			t.Errorf("%s: %s, want %v", target, d, want)
		}
	}
}
