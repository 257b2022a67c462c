package main

import (
	"context"
	"errors"
	"log/slog"

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

// planCapacity fills in the backend's per-session memory and session cap, and
// warns when the flags promise the sessions more memory than the machine has.
// Backends that plan nothing set no memory limit and keep the executor's default cap.
func (f *engineFlags) planCapacity(ctx context.Context, b backend, log *slog.Logger) {
	if b.plan == nil {
		return
	}
	plan, err := b.plan(ctx, &f.backends, f.pool.maxSessions)
	if err != nil {
		log.Warn("capacity: the "+b.name+" daemon's memory is unknown; --max-sessions keeps its fixed default", "err", err)
	}
	f.applyPlan(plan, log)
}

// applyPlan takes the plan's values and logs it, with a warning when it overcommits.
func (f *engineFlags) applyPlan(plan capacity.Plan, log *slog.Logger) {
	f.backends.sessionMemory, f.pool.maxSessions = plan.SessionMemory, plan.MaxSessions
	if w := plan.Warning("--memory", "--max-sessions"); w != "" {
		log.Warn("capacity: memory overcommitted: " + w)
		return
	}
	log.Info("capacity", "plan", plan.String())
}
