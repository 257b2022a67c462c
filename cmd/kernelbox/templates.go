package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/kernelbox/kernelbox/backends/docker"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/templates"
)

// registerTemplates adds --templates, a server flag (serve and mcp).
func (f *engineFlags) registerTemplates(fs *flag.FlagSet) {
	fs.StringVar(&f.templates, "templates", "", "JSON file of named session templates (kernel, image, limits, env, preload, warm pool); none of them may ask more than the flags give a session (see README, Templates)")
}

// serverLimits returns what one session gets from the flags, which are also the caps
// on every template: for docker its image and container limits; other backends set
// no container limits.
func (f *engineFlags) serverLimits() (executor.Limits, templates.Caps) {
	caps := templates.Caps{}
	if f.idleTimeout > 0 {
		caps.IdleTimeout = f.idleTimeout
	}
	if f.backend == "swarm" {
		return f.swarm.limits(f, caps)
	}
	if f.backend != "docker" {
		return executor.Limits{Kernel: "python3"}, caps
	}
	l := executor.Limits{
		Kernel: "python3", Image: f.image, Memory: f.sessionMemory,
		CPUs: docker.DefaultCPUs, Pids: docker.DefaultPidsLimit, MaxLifetime: docker.DefaultMaxLifetime,
	}
	if l.Image == "" {
		l.Image = docker.DefaultImage
	}
	switch {
	case l.Memory == 0:
		l.Memory = docker.DefaultMemory
	case l.Memory < 0:
		l.Memory = 0 // --memory none
	}
	caps.Memory, caps.CPUs, caps.Pids, caps.MaxLifetime = l.Memory, l.CPUs, l.Pids, l.MaxLifetime
	return l, caps
}

// loadTemplates reads --templates, if given.
func (f *engineFlags) loadTemplates(caps templates.Caps) ([]executor.Template, error) {
	if f.templates == "" {
		return nil, nil
	}
	ts, err := templates.Load(f.templates, caps)
	if err != nil {
		return nil, fmt.Errorf("--templates: %w", err)
	}
	return ts, nil
}

// templateTimeout is the idle timeout the executor takes from the flag: its 0 means
// never, the option's 0 means the default.
func idleOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
