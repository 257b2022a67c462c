package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/templates"
)

// poolFlags shape the sessions a server keeps across calls: their number, warm
// pool, idle timeout and templates. serve and mcp register them; run, which has
// one session for the length of a notebook, keeps newEngineFlags' defaults.
type poolFlags struct {
	warm        int
	maxSessions int
	idleTimeout time.Duration
	templates   string
	durable     durableFlags
}

// durableFlags are the hibernation settings (executor.Options' of the same names).
type durableFlags struct {
	hibernateAfter time.Duration
	retention      time.Duration
	snapshotMax    int64
	checkpoint     string
	saveTimeout    time.Duration
	maxHibernated  int
}

// register adds the "Sessions" group.
func (p *poolFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&p.warm, "warm", p.warm, "kernels (or containers) kept started ahead of need")
	fs.IntVar(&p.maxSessions, "max-sessions", p.maxSessions, "maximum live sessions, warm ones included (default: for docker, as many --memory sessions as fit in the daemon's memory less a 10% (at least 1 GiB) reserve, 1 to 64; otherwise one per 384 MiB of RAM, 4 to 64)")
	fs.DurationVar(&p.idleTimeout, "idle-timeout", p.idleTimeout, "close sessions idle this long (0 = never)")
	fs.DurationVar(&p.durable.hibernateAfter, "hibernate-after", 0, "hibernate Python sessions idle this long instead of closing them: their variables are saved in their directory and their kernel stopped, and their next call restores them (0 = off; a template's hibernate_after overrides it)")
	fs.DurationVar(&p.durable.retention, "hibernated-retention", 7*24*time.Hour, "close sessions hibernated this long (files kept, snapshot deleted); 0 = keep them")
	fs.StringVar(&p.durable.checkpoint, "checkpoint", "", `"after_call": save each Python session's variables after every call that left them whole, so that a kernel that dies (OOM, crash) comes back with them; costs about the time of a hibernate per call, before the next call runs ("" or "off" = none; a template's checkpoint overrides it)`)
	fs.DurationVar(&p.durable.saveTimeout, "snapshot-timeout", 2*time.Minute, "longest a save of a session's variables (hibernate, fork) may take; past it the kernel is interrupted, nothing is kept and the session stays live")
	fs.IntVar(&p.durable.maxHibernated, "max-hibernated", 1000, "most hibernated sessions kept at once; a hibernate past it is refused (never made room for by deleting one)")
	fs.Int64Var(&p.durable.snapshotMax, "snapshot-max-bytes", 0, "largest snapshot of a session's variables; a bigger namespace does not hibernate (default: the disk quota, else 8 GiB)")
	fs.StringVar(&p.templates, "templates", p.templates, "JSON file of named session templates (kernel, image, limits, env, preload, warm pool); none of them may ask more than the flags give a session (see docs/templates.md)")
}

// serverLimits returns what one session gets from the flags, which are also the caps
// on every template: the backend's limits (for docker and swarm its image and
// container limits; other backends set none) and the idle timeout.
func (f *engineFlags) serverLimits(b backend) (executor.Limits, templates.Caps) {
	caps := templates.Caps{}
	if f.pool.idleTimeout > 0 {
		caps.IdleTimeout = f.pool.idleTimeout
	}
	if b.limits == nil {
		return executor.Limits{Kernel: "python3"}, caps
	}
	l := b.limits(&f.backends)
	lc := templates.LimitCaps(l)
	lc.IdleTimeout = caps.IdleTimeout
	return l, lc
}

// loadTemplates reads --templates, if given.
func (p *poolFlags) loadTemplates(caps templates.Caps) ([]executor.Template, error) {
	if p.templates == "" {
		return nil, nil
	}
	ts, err := templates.Load(p.templates, caps)
	if err != nil {
		return nil, fmt.Errorf("--templates: %w", err)
	}
	return ts, nil
}

// idleOption is the idle timeout the executor takes from the flag: the flag's 0
// means never, the option's 0 means the default.
func idleOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
