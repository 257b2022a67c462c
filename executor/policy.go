package executor

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// The executor's permission policy: the one it is given or the default, and the
// rule added to it that keeps each session's private directory out of the others' reach.

// optsPermissions is Options.Permissions, or when it is nil the default policy
// with the working directory, home and artifacts dir as its variables.
func optsPermissions(opts *Options) (*permissions.Engine, error) {
	if opts.Permissions != nil {
		return opts.Permissions, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("executor: default policy: %w", err)
	}
	home, _ := os.UserHomeDir()
	return &permissions.Engine{
		Policy: permissions.DefaultPolicy(),
		Vars:   permissions.Vars{Workdir: wd, Home: home, Artifacts: opts.Workspace.ArtifactsDir()},
		Logger: opts.Logger,
	}, nil
}

// sessionGuard returns a copy of perm whose policy also denies reading any session's
// private directory: one agent must not stage another session's files through the
// host path. The rule names the denial early; the workspace refuses to stage from
// any of kernelbox's own directories (the artifacts directory and the backend's
// StateDirs too) whatever the policy says (workspace.ErrPrivate).
func sessionGuard(perm *permissions.Engine, ws *workspace.Manager) *permissions.Engine {
	p := *perm
	p.Policy.Rules = append(append([]permissions.Rule(nil), perm.Policy.Rules...), permissions.Rule{
		Effect:     permissions.Deny,
		Capability: "*",
		Target:     filepath.Join(ws.Root(), "sessions", "**"),
		Reason:     "session directories are private to their sessions",
		Source:     "executor",
	})
	return &p
}
