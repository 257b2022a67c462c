package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/kernelbox/kernelbox/executor"
)

// keepFlags is what serve's sessions need to outlive a restart of serve (issue 34
// item 1): the --on-stop policy, and the workspace's private state directory,
// WORKSPACE/state (0700), which holds the executor's sessions.json, the docker
// backend's docker.json (containers, their servers' tokens), the swarm
// backend's swarm.json (services, their servers' addresses and tokens) or the
// remote backend's remote.json (gateway URLs and kernel ids, never a token), and
// the calls journal.
// A nil *keepFlags (run, mcp) keeps nothing.
type keepFlags struct {
	onStop string // as given; "" = the backend's default

	stateDir string
	stop     executor.StopPolicy
	keeps    bool // the backend keeps its containers or services across a restart (its row's keeps)
}

// prepare settles the policy and makes the state directory, before the workspace
// and backend are built; it tells a backend that keeps its sessions (docker,
// swarm, remote) its state file.
func (k *keepFlags) prepare(f *engineFlags, kind backend, log *slog.Logger) error {
	if k == nil {
		return nil
	}
	k.keeps, k.stop = kind.keeps, kind.onStop
	if k.stop == "" {
		k.stop = executor.StopClose
	}
	if k.onStop != "" {
		p, err := executor.ParseStopPolicy(k.onStop)
		if err != nil {
			return exitCode{2, "--on-stop: " + err.Error()}
		}
		k.stop = p
	}
	root, err := filepath.Abs(f.workspace)
	if err != nil {
		return err
	}
	k.stateDir = filepath.Join(root, "state")
	if err := os.MkdirAll(k.stateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if err := os.Chmod(k.stateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if kind.keeps {
		f.backends.stateFile = filepath.Join(k.stateDir, kind.name+".json")
	}
	log.Debug("sessions are kept across restarts", "state_dir", k.stateDir, "on_stop", string(k.stop))
	return nil
}

// dir is the state directory, or "".
func (k *keepFlags) dir() string {
	if k == nil {
		return ""
	}
	return k.stateDir
}

// policy is the stop policy (close without keepFlags).
func (k *keepFlags) policy() executor.StopPolicy {
	if k == nil {
		return executor.StopClose
	}
	return k.stop
}

// journal is the calls journal's path, or "".
func (k *keepFlags) journal() string {
	if k == nil || k.stateDir == "" {
		return ""
	}
	return filepath.Join(k.stateDir, "calls.json")
}

// pinned lists the sessions whose directories the workspace keeps whatever
// --max-kept-sessions says: the hibernated and checkpointed ones the last serve
// listed, under any --on-stop.
func (k *keepFlags) pinned() []string {
	if k == nil || k.stateDir == "" {
		return nil
	}
	return executor.PinnedSessions(k.stateDir)
}

// mounted lists the sessions whose disks stay mounted for their adoption: those
// the last serve of a backend that keeps its sessions left running.
func (k *keepFlags) mounted() []string {
	if k == nil || !k.keeps || k.stateDir == "" {
		return nil
	}
	return executor.KeptSessions(k.stateDir)
}
