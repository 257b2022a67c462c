package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/runtimefile"
	"github.com/kernelbox/kernelbox/mcpserver"
	"github.com/kernelbox/kernelbox/metrics"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// engineFlags configure an executor; serve, mcp and run share them.
type engineFlags struct {
	backend     string
	workspace   string
	artifacts   string
	workdir     string
	policy      string
	python      string
	image       string
	data        multiFlag
	warm        int
	maxSessions int
	idleTimeout time.Duration
	timeout     time.Duration
	maxOutput   int
	logLevel    string
	templates   string      // templates.go; serve and mcp only
	mcp         mcpFlags    // mcp.go
	remote      remoteFlags // remote.go
	swarm       swarmFlags  // swarm.go
	calls       callFlags   // attach.go
	disk        diskFlags   // disk.go

	// capacity.go
	memory        sizeFlag // --memory as given; 0 = derive
	sessionMemory int64    // the docker per-session limit planCapacity settled on
}

func (f *engineFlags) register(fs *flag.FlagSet, defaultBackend string) {
	fs.StringVar(&f.backend, "backend", envOr("KERNELBOX_BACKEND", defaultBackend), "where kernels run: none, local (UNSANDBOXED), docker, remote (existing Jupyter servers, --gateway), swarm (a service per session on Docker Swarm, --swarm-*)")
	fs.StringVar(&f.workspace, "workspace", envOr("KERNELBOX_WORKSPACE", defaultWorkspace()), "directory for session dirs (and artifacts, unless --artifacts)")
	fs.StringVar(&f.artifacts, "artifacts", "", "shared artifacts directory (default WORKSPACE/artifacts)")
	fs.StringVar(&f.workdir, "workdir", "", "directory whose files inputs may be read from by default, ${workdir} in policies (default: current directory)")
	fs.StringVar(&f.policy, "policy", "", "permission policy JSON file (default: built-in rules)")
	fs.StringVar(&f.python, "python", "", "Python with jupyter_server and ipykernel, for --backend local (default: KERNELBOX_PYTHON, /usr/bin/python3, python3)")
	fs.StringVar(&f.image, "image", "", "kernel image for --backend docker (default kernelbox/kernel:latest)")
	fs.Var(&f.data, "data", "NAME=HOSTDIR: expose a host dir read-only at data/NAME in every session (repeatable)")
	fs.IntVar(&f.warm, "warm", 0, "kernels (or containers) kept started ahead of need")
	fs.IntVar(&f.maxSessions, "max-sessions", 0, "maximum live sessions, warm ones included (default: for docker, as many --memory sessions as fit in the daemon's memory less a 10% (at least 1 GiB) reserve, 1 to 64; otherwise one per 384 MiB of RAM, 4 to 64)")
	fs.Var(&f.memory, "memory", "per-session memory limit for --backend docker, e.g. 2g or 512m, none for no limit; swap is limited to the same (default 2 GiB, or the whole budget when less)")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", 30*time.Minute, "close sessions idle this long (0 = never)")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "default per-call timeout")
	fs.IntVar(&f.maxOutput, "max-output-bytes", 0, "stdout+stderr kept per call (default 8 MiB)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	f.mcp.register(fs)
	f.remote.register(fs)
	f.swarm.register(fs)
	f.calls.register(fs)
	f.disk.register(fs)
}

// engine is a built executor with what it was built from.
type engine struct {
	exec    *executor.Executor
	backend executor.Backend
	ws      *workspace.Manager
	log     *slog.Logger
	metrics *metrics.Metrics  // metrics.go
	mcp     mcpserver.Options // mcp.go
	calls   *calls.Registry   // shared by the HTTP API and MCP
}

func (f *engineFlags) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl})), nil
}

// build wires the workspace, permission engine, backend and executor.
func (f *engineFlags) build(ctx context.Context, log *slog.Logger, approver permissions.Approver) (*engine, error) {
	wsRoot, err := filepath.Abs(f.workspace)
	if err != nil {
		return nil, err
	}
	// The runtime dir holds the server's token; the backend's own dirs are added
	// by the executor (executor.StateKeeper).
	var private []string
	if dir, err := runtimefile.Dir(); err == nil {
		private = append(private, dir)
	}
	wsOpts := workspace.Options{Root: wsRoot, ArtifactsDir: f.artifacts, PrivateDirs: private, Logger: log}
	if err := f.disk.apply(&wsOpts); err != nil {
		return nil, err
	}
	ws, err := workspace.New(wsOpts)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	perm, err := f.permissions(ws, log, approver)
	if err != nil {
		ws.Close()
		return nil, err
	}
	m := newMetrics()
	perm.OnDecision = m.ObserveDecision
	data, err := f.dataMounts()
	if err != nil {
		ws.Close()
		return nil, err
	}
	f.planCapacity(ctx, log) // capacity.go
	limits, caps := f.serverLimits()
	tmpls, err := f.loadTemplates(caps)
	if err != nil {
		ws.Close()
		return nil, err
	}
	backend, err := newBackend(ctx, f, log)
	if err != nil {
		ws.Close()
		return nil, err
	}
	idle := idleOption(f.idleTimeout)
	e, err := executor.New(executor.Options{
		Backend:        backend,
		Workspace:      ws,
		Permissions:    perm,
		Data:           data,
		DefaultTimeout: f.timeout,
		MaxSessions:    f.maxSessions,
		IdleTimeout:    idle,
		MaxStreamBytes: f.maxOutput,
		Warm:           f.warm,
		Templates:      tmpls,
		Limits:         limits,
		Observer:       m,
		Logger:         log,
	})
	if err != nil {
		if backend != nil {
			_ = backend.Close(context.Background())
		}
		ws.Close()
		return nil, err
	}
	m.WatchSessions(e.Sessions)
	m.WatchTemplates(e.TemplateInfos)
	reg := calls.New(e, f.calls.options(log))
	mo := f.mcpOptions(log)
	mo.Calls = reg
	return &engine{exec: e, backend: backend, ws: ws, log: log, metrics: m, mcp: mo, calls: reg}, nil
}

// close stops the executor (which ends the calls still running) and then waits
// for the calls' goroutines.
func (en *engine) close() error {
	err := en.exec.Close()
	_ = en.calls.Close()
	en.ws.Close()
	return err
}

func (f *engineFlags) permissions(ws *workspace.Manager, log *slog.Logger, approver permissions.Approver) (*permissions.Engine, error) {
	policy := permissions.DefaultPolicy()
	if f.policy != "" {
		p, err := permissions.LoadPolicy(f.policy)
		if err != nil {
			return nil, fmt.Errorf("--policy: %w", err)
		}
		policy = p
	}
	wd := f.workdir
	if wd == "" {
		var err error
		if wd, err = os.Getwd(); err != nil {
			return nil, err
		}
		if home, herr := os.UserHomeDir(); wd == "/" && herr == nil && home != "/" {
			// Started from / (as desktop MCP clients do): the home directory is the
			// natural project root; its secrets stay denied by the built-in rules.
			wd = home
		}
	}
	wd, err := filepath.Abs(wd)
	if err != nil {
		return nil, err
	}
	if wd == "/" {
		return nil, fmt.Errorf("the workdir is / (every file would be readable by default); run kernelbox from a project directory or pass --workdir")
	}
	home, _ := os.UserHomeDir()
	vars := permissions.Vars{Workdir: wd, Home: home, Artifacts: ws.ArtifactsDir()}
	if err := policy.Validate(vars); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return &permissions.Engine{Policy: policy, Vars: vars, Approver: approver, Logger: log}, nil
}

func (f *engineFlags) dataMounts() ([]executor.DataMount, error) {
	var out []executor.DataMount
	for _, d := range f.data {
		name, dir, ok := strings.Cut(d, "=")
		if !ok || name == "" || dir == "" {
			return nil, fmt.Errorf("--data %q: want NAME=HOSTDIR", d)
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		out = append(out, executor.DataMount{Name: name, HostDir: abs})
	}
	return out, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// stdinIsTerminal reports whether stdin is an interactive terminal.
func stdinIsTerminal() bool {
	fi, err := os.Stdin.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// defaultWorkspace is .kernelbox in the current directory, or, when kernelbox is
// started from / (as desktop MCP clients do), ~/.local/share/kernelbox.
func defaultWorkspace() string {
	if wd, err := os.Getwd(); err == nil && wd == "/" {
		if home, err := os.UserHomeDir(); err == nil && home != "/" {
			return filepath.Join(home, ".local", "share", "kernelbox")
		}
	}
	return ".kernelbox"
}
