package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/kernelbox/kernelbox/backends/docker"
	"github.com/kernelbox/kernelbox/internal/capacity"
)

// sizeFlag is a byte count given as "2g", "512m" or plain bytes; "none" means no
// limit (-1). Its zero value means "not set".
type sizeFlag int64

func (s *sizeFlag) String() string {
	switch {
	case *s == 0:
		return ""
	case *s < 0:
		return "none"
	}
	return capacity.FormatBytes(int64(*s))
}

func (s *sizeFlag) Set(v string) error {
	if v == "none" {
		*s = -1
		return nil
	}
	n, err := capacity.ParseBytes(v)
	if err != nil {
		return err
	}
	if n == 0 {
		// 0 would mean "the default" to the backend, not what was typed.
		return errZeroSize
	}
	*s = sizeFlag(n)
	return nil
}

var errZeroSize = errors.New("a size of 0: give a size such as 2g, or none for no limit")

// dockerCapacity plans the docker sessions' memory: the per-session limit (--memory)
// and the session cap (--max-sessions), each derived when not given, from the memory
// the daemon reports. Without a daemon answer the plan derives no cap, and the
// executor's default applies.
func dockerCapacity(ctx context.Context, memory sizeFlag, maxSessions int) (capacity.Plan, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	mem, err := docker.DaemonMemory(ctx, "")
	return capacity.Make(capacity.Input{
		Memory:               mem,
		SessionMemory:        int64(memory),
		DefaultSessionMemory: docker.DefaultMemory,
		MaxSessions:          maxSessions,
	}), err
}

// planCapacity fills in the docker backend's per-session memory and session cap, and
// warns when the flags promise the sessions more memory than the daemon's machine
// has. Other backends set no memory limit and keep the executor's default cap.
func (f *engineFlags) planCapacity(ctx context.Context, log *slog.Logger) {
	if f.backend != "docker" {
		return
	}
	plan, err := dockerCapacity(ctx, f.memory, f.maxSessions)
	if err != nil {
		log.Warn("capacity: the docker daemon's memory is unknown; --max-sessions keeps its fixed default", "err", err)
	}
	f.applyPlan(plan, log)
}

// applyPlan takes the plan's values and logs it, with a warning when it overcommits.
func (f *engineFlags) applyPlan(plan capacity.Plan, log *slog.Logger) {
	f.sessionMemory, f.maxSessions = plan.SessionMemory, plan.MaxSessions
	if w := plan.Warning("--memory", "--max-sessions"); w != "" {
		log.Warn("capacity: memory overcommitted: " + w)
		return
	}
	log.Info("capacity", "plan", plan.String())
}
