package permissions_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/kernelbox/kernelbox/permissions"
)

func ExampleEngine_Check() {
	// A fake host: a project directory, and a home with AWS credentials that a
	// harmless-looking link in the project points at.
	tmp, err := os.MkdirTemp("", "kernelbox-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	tmp, _ = filepath.EvalSymlinks(tmp)
	work, home := filepath.Join(tmp, "project"), filepath.Join(tmp, "home")
	_ = os.MkdirAll(work, 0o755)
	_ = os.MkdirAll(filepath.Join(home, ".aws"), 0o700)
	_ = os.WriteFile(filepath.Join(work, "data.csv"), []byte("x\n1\n"), 0o644)
	_ = os.WriteFile(filepath.Join(home, ".aws", "credentials"), []byte("secret"), 0o600)
	_ = os.Symlink(filepath.Join(home, ".aws", "credentials"), filepath.Join(work, "notes.csv"))

	engine := &permissions.Engine{
		Policy: permissions.DefaultPolicy(),
		Vars:   permissions.Vars{Workdir: work, Home: home},
	}
	args := map[string]any{"code": "import pandas as pd", "inputs": []any{"data.csv", "notes.csv"}}
	report, err := engine.Check(context.Background(), permissions.ExecuteCapabilities(), args)

	show := func(s string) string { return strings.ReplaceAll(s, tmp, "$TMP") }
	for _, d := range report.Decisions {
		fmt.Println(show(d.String()))
	}
	fmt.Println("denied:", errors.Is(err, permissions.ErrDenied))
	for _, rc := range report.Allowed(permissions.FilesystemRead) {
		fmt.Printf("stage %s as inputs/%s\n", show(rc.Target), filepath.Base(rc.Requested))
	}
	// Output:
	// allow python.exec.stateful: allowed by rule "running code is allowed; isolating it is the backend's job" (builtin)
	// allow filesystem.read on $TMP/project/data.csv (requested as "data.csv"): allowed by rule "files in the working directory" (builtin)
	// deny filesystem.read on $TMP/home/.aws/credentials (requested as "notes.csv"): denied by rule "cloud credentials" (builtin)
	// denied: true
	// stage $TMP/project/data.csv as inputs/data.csv
}

func ExamplePolicy_Evaluate() {
	policy := permissions.DefaultPolicy()
	vars := permissions.Vars{Workdir: "/home/ada/project", Home: "/home/ada"}
	for _, target := range []string{
		"/home/ada/project/data.csv",
		"/home/ada/.aws/credentials",
		"/etc/shadow",
		"/srv/shared/iris.csv",
	} {
		// Evaluate is pure: the target must already be canonical (see Resolve).
		rc := permissions.ResolvedCapability{Name: permissions.FilesystemRead, Requested: target, Target: target}
		fmt.Println(policy.Evaluate(rc, vars))
	}
	// Output:
	// allow filesystem.read on /home/ada/project/data.csv: allowed by rule "files in the working directory" (builtin)
	// deny filesystem.read on /home/ada/.aws/credentials: denied by rule "cloud credentials" (builtin)
	// deny filesystem.read on /etc/shadow: denied by rule "system secrets" (builtin)
	// ask filesystem.read on /srv/shared/iris.csv: no rule matched
}

func ExampleParsePolicy() {
	const file = `{
	  "rules": [
	    {"effect": "allow", "capability": "filesystem.read", "target": "/srv/datasets/**", "reason": "shared datasets"},
	    {"effect": "deny", "capability": "filesystem.read", "target": "/srv/datasets/private/**", "reason": "personal data"}
	  ]
	}`
	policy, err := permissions.ParsePolicy(strings.NewReader(file), "policy.json")
	if err != nil {
		log.Fatal(err)
	}
	vars := permissions.Vars{Workdir: "/home/ada/project", Home: "/home/ada"}
	for _, target := range []string{"/srv/datasets/iris.csv", "/srv/datasets/private/salaries.csv"} {
		rc := permissions.ResolvedCapability{Name: permissions.FilesystemRead, Requested: target, Target: target}
		fmt.Println(policy.Evaluate(rc, vars))
	}

	_, err = permissions.ParsePolicy(strings.NewReader(`{"rules": [{"effect": "permit", "capability": "*"}]}`), "bad.json")
	fmt.Println(err)
	// Output:
	// allow filesystem.read on /srv/datasets/iris.csv: allowed by rule "shared datasets" (policy.json rule 1)
	// deny filesystem.read on /srv/datasets/private/salaries.csv: denied by rule "personal data" (policy.json rule 2); deny beats the matching rule "shared datasets" (policy.json rule 1)
	// parse policy: bad.json rule 1: unknown effect "permit" (want allow, deny or ask)
}

func ExamplePromptApprover() {
	approver := &permissions.PromptApprover{In: strings.NewReader("y\n"), Out: os.Stdout}
	d := permissions.Decision{
		Capability: permissions.ResolvedCapability{Name: permissions.FilesystemRead, Requested: "/srv/iris.csv", Target: "/srv/iris.csv"},
		Effect:     permissions.Ask,
		Reason:     "no rule matched",
	}
	ok, err := approver.Approve(context.Background(), d)
	fmt.Println(ok, err)
	// Output:
	// Allow filesystem.read on /srv/iris.csv? [y/N] true <nil>
}

func ExampleResolve() {
	caps := permissions.ExecuteCapabilities()
	args := map[string]any{"inputs": []any{"/", "/no/such/file"}}
	resolved, err := permissions.Resolve(caps, args, "/")
	if err != nil {
		log.Fatal(err)
	}
	for _, rc := range resolved {
		fmt.Printf("%s target=%q problem=%q\n", rc.Name, rc.Target, rc.Problem)
	}

	_, err = permissions.Resolve(caps, map[string]any{"inputs": 42.0}, "/")
	fmt.Println(err)
	// Output:
	// python.exec.stateful target="" problem=""
	// filesystem.read target="/" problem=""
	// filesystem.read target="" problem="cannot resolve path: no such file or directory"
	// resolve capability filesystem.read: argument "inputs": invalid argument: got a number, want a path or a list of paths
}
