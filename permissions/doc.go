// Package permissions decides which capabilities a tool call may use: whether code
// may run at all, and which host files an agent may stage into a session. It is a
// small policy engine in the style of cedar-go: deny by default, every rule
// evaluated, any matching deny wins, and each Decision says why.
//
// Start reading at Engine.Check, which does the whole job for one call:
//
//  1. Resolve turns the tool's declared capabilities (ExecuteCapabilities for the
//     execute tool) and the call's arguments into ResolvedCapability values, one per
//     path, each made canonical by Canonical: absolute against the working
//     directory, symlinks resolved. Rules judge where a path really leads, so a link
//     in the working directory that points at /etc/shadow is judged as /etc/shadow.
//     A path that cannot be resolved is denied.
//  2. Policy.Evaluate, a pure function, matches every rule against each one: any
//     matching deny denies, else any matching ask asks, else any matching allow
//     allows; no match means ask.
//  3. The Engine's Approver (PromptApprover on a terminal) settles each ask. Without
//     an Approver, ask means deny.
//
// Check returns a Report of all decisions in order and, if any was denied, a
// *DeniedError wrapping ErrDenied. Callers stage only Report.Allowed(FilesystemRead),
// copying each Target (never re-resolving Requested).
//
// # Rules and patterns
//
// A Rule has an Effect (allow, deny, ask), a glob on the capability name
// ("filesystem.read", "filesystem.*", "*"), an optional glob on the canonical target
// path, a Reason and a Source. Target patterns are absolute: they start with "/" or
// with ${workdir}, ${home} or ${artifacts} (from Vars). In them * matches within one
// path element, ? matches one character, and ** (a whole element) matches any number
// of elements, including none: /data/** matches /data itself and everything below
// it, but not /database. An empty target pattern matches any target and also none.
//
// # Policy files
//
// kernelbox serve --policy FILE loads a JSON file with LoadPolicy:
//
//	{
//	  "defaults": true,
//	  "rules": [
//	    {"effect": "allow", "capability": "filesystem.read", "target": "/srv/datasets/**", "reason": "shared datasets"},
//	    {"effect": "deny", "capability": "filesystem.read", "target": "/srv/datasets/private/**", "reason": "personal data"},
//	    {"effect": "ask", "capability": "filesystem.read", "target": "${workdir}/secrets/**", "reason": "secrets need a human"}
//	  ]
//	}
//
// "defaults" (true when absent) puts DefaultRules before the file's rules. Each rule
// has "effect" and "capability", and optionally "target" and "reason"; its Source
// becomes "FILE rule N". Unknown fields, unknown effects, empty capability patterns
// and relative or malformed targets are errors naming the rule. A rule may also set
// "ignore_case": true to match its target without regard to letter case.
//
// # Two tiers of deny
//
// Deny beats allow, with one exception made on purpose: the built-in credential
// file names (Rule.Overridable; see DefaultRules) yield to an allow rule whose
// target is one exact path, with no wildcard, equal to the target. A project that
// needs its test fixture tests/fixtures/server.pem staged writes
//
//	{"effect": "allow", "capability": "filesystem.read", "target": "${workdir}/tests/fixtures/server.pem", "reason": "TLS test fixture"}
//
// and that one file is allowed, the decision saying which deny it overrides; a
// glob allow (${workdir}/**/*.pem, /**) overrides nothing. Every other deny, built in
// (SSH, cloud and GnuPG directories under ${home}, /etc/shadow, /proc, the Docker
// socket...) or written in a policy file, beats every allow; a policy that must
// re-open one of those sets "defaults": false and writes every rule itself.
//
// # Defaults
//
// DefaultRules allows running code (python.exec.stateful: the sandbox is the
// backend's job, not this package's), the session files API (files.read to
// download and list, files.write to upload and delete; they have no target, as
// those paths are inside a session and the workspace keeps them there) and
// reading below ${workdir}, and denies
// credentials and system secrets (SSH, cloud, GnuPG, Kubernetes and Docker
// credentials under ${home}, /etc/shadow and friends, container secrets, the
// Docker socket, /proc, /sys, /dev) to every capability, wherever an allow points.
// It also denies credential file names anywhere and in any case (.env, .env.*,
// credentials, .aws/, .npmrc, .netrc, .pypirc, .git-credentials, .git/config,
// .kube/, .docker/config.json, id_rsa and the other ssh-keygen names, *.pem, *.key,
// *.p12, keystores, secrets.yaml and other whole-word "secret" names, service
// account keys, .pgpass, .my.cnf, .htpasswd, Terraform state and variables, shell
// histories): the Overridable tier above.
//
// # Limits
//
// Matching is byte-exact unless a rule sets IgnoreCase (the built-in credential
// names do), so on a case-insensitive file system (macOS, by default) a path spelled
// in another case escapes the other deny patterns; kernelbox targets Linux. Names
// are what is matched, never contents: a secret in data.csv is not found. A
// decision holds for the moment of the check: the caller opens Target, not Requested,
// and should refuse symlinks when it does.
package permissions
