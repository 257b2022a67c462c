package main

import (
	"context"
	"errors"
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
	"github.com/kernelbox/kernelbox/internal/undo"
	"github.com/kernelbox/kernelbox/mcpserver"
	"github.com/kernelbox/kernelbox/metrics"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// engineFlags configure an executor: serve, mcp and run build one from them. The
// flags are in groups (flags.go), and a command registers only the groups it uses:
// run has no pool, calls or MCP flags.
type engineFlags struct {
	backend   string
	workspace string
	artifacts string
	workdir   string
	policy    string
	data      multiFlag
	timeout   time.Duration
	maxOutput int
	logLevel  string
	disk      diskFlags     // disk.go
	pool      poolFlags     // templates.go; serve and mcp register it, run keeps its defaults
	backends  backendConfig // backends.go: every backend's own flags
	keep      *keepFlags    // stop.go: set by serve, whose sessions outlive a restart; nil for the others
}

// newEngineFlags returns the engine's defaults, which are also its flags' defaults.
func newEngineFlags(defaultBackend string) *engineFlags {
	return &engineFlags{
		backend:   envOr("KERNELBOX_BACKEND", defaultBackend),
		workspace: envOr("KERNELBOX_WORKSPACE", defaultWorkspace()),
		timeout:   5 * time.Minute,
		logLevel:  "info",
		pool:      poolFlags{idleTimeout: 30 * time.Minute},
	}
}

// register adds the engine's own flags, the "Engine" group: what every command
// that builds an executor takes, whichever backend it runs.
func (f *engineFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.backend, "backend", f.backend, backendUsage())
	fs.StringVar(&f.workspace, "workspace", f.workspace, "directory for session dirs (and artifacts, unless --artifacts)")
	fs.StringVar(&f.artifacts, "artifacts", f.artifacts, "shared artifacts directory (default WORKSPACE/artifacts)")
	fs.StringVar(&f.workdir, "workdir", f.workdir, "directory whose files inputs may be read from by default, ${workdir} in policies (default: current directory)")
	fs.StringVar(&f.policy, "policy", f.policy, "permission policy JSON file (default: built-in rules)")
	fs.Var(&f.data, "data", "NAME=HOSTDIR: expose a host dir read-only at data/NAME in every session (repeatable)")
	fs.DurationVar(&f.timeout, "timeout", f.timeout, "default per-call timeout")
	fs.IntVar(&f.maxOutput, "max-output-bytes", f.maxOutput, "stdout+stderr kept per call (default 8 MiB)")
	fs.StringVar(&f.logLevel, "log-level", f.logLevel, "debug, info, warn or error")
	f.disk.register(fs)
}

// engine is a built executor with what it was built from.
type engine struct {
	exec    *executor.Executor
	backend executor.Backend
	kind    backend // its row of the backend table
	ws      *workspace.Manager
	log     *slog.Logger
	metrics *metrics.Metrics // metrics.go

	// Set by serverFlags.serve, for the commands that serve clients (server.go).
	mcp   mcpserver.Options
	calls *calls.Registry // shared by the HTTP API and MCP
	// journal is the calls registry's journal (stop.go), or "".
	journal string
	// templates are the loaded templates, whose secrets SIGHUP reloads (secrets.go).
	templates []executor.Template
}

func (f *engineFlags) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl})), nil
}

// build wires the workspace, permission engine, backend and executor. What it
// opened is closed again when a later step fails (internal/undo).
func (f *engineFlags) build(ctx context.Context, log *slog.Logger, approver permissions.Approver) (en *engine, err error) {
	kind, err := lookupBackend(f.backend)
	if err != nil {
		return nil, err
	}
	if err := f.keep.prepare(f, kind, log); err != nil { // stop.go
		return nil, err
	}
	var cleanup undo.List
	defer func() {
		if err != nil {
			err = errors.Join(err, cleanup.Run(buildUndoTimeout))
		}
	}()
	ws, err := f.newWorkspace(log)
	if err != nil {
		return nil, err
	}
	cleanup.Add("close workspace", func(context.Context) error { return ws.Close() })
	perm, err := f.permissions(ws, log, approver)
	if err != nil {
		return nil, err
	}
	m := newMetrics()
	perm.OnDecision = m.ObserveDecision
	data, err := f.dataMounts()
	if err != nil {
		return nil, err
	}
	f.planCapacity(ctx, kind, log) // capacity.go
	limits, caps := f.serverLimits(kind)
	tmpls, err := f.pool.loadTemplates(caps)
	if err != nil {
		return nil, err
	}
	backend, err := kind.open(ctx, &f.backends, log)
	if err != nil {
		return nil, err
	}
	cleanup.Add("close backend", backend.Close)
	e, err := executor.New(executor.Options{
		Backend:             backend,
		Workspace:           ws,
		Permissions:         perm,
		Data:                data,
		DefaultTimeout:      f.timeout,
		MaxSessions:         f.pool.maxSessions,
		IdleTimeout:         idleOption(f.pool.idleTimeout),
		HibernateAfter:      f.pool.durable.hibernateAfter,
		HibernatedRetention: idleOption(f.pool.durable.retention),
		SnapshotMaxBytes:    f.pool.durable.snapshotMax,
		SnapshotTimeout:     f.pool.durable.saveTimeout,
		MaxHibernated:       f.pool.durable.maxHibernated,
		Checkpoint:          f.pool.durable.checkpoint,
		MaxStreamBytes:      f.maxOutput,
		Warm:                f.pool.warm,
		Templates:           tmpls,
		Limits:              limits,
		Observer:            m,
		Logger:              log,
		StateDir:            f.keep.dir(),
		OnClose:             f.keep.policy(),
	})
	if err != nil {
		return nil, err
	}
	m.WatchSessions(e.Sessions)
	m.WatchTemplates(e.TemplateInfos)
	return &engine{exec: e, backend: backend, kind: kind, ws: ws, log: log, metrics: m, journal: f.keep.journal(), templates: tmpls}, nil
}

// buildUndoTimeout bounds the closing of what a failed build opened: a backend
// that started containers removes them within it.
const buildUndoTimeout = time.Minute

// newWorkspace opens the workspace the flags describe.
func (f *engineFlags) newWorkspace(log *slog.Logger) (*workspace.Manager, error) {
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
	if d := f.keep.dir(); d != "" {
		private = append(private, d)
	}
	wsOpts := workspace.Options{Root: wsRoot, ArtifactsDir: f.artifacts, PrivateDirs: private, Logger: log, KeepMounted: f.keep.mounted(), Pinned: f.keep.pinned()}
	if err := f.disk.apply(&wsOpts); err != nil {
		return nil, err
	}
	ws, err := workspace.New(wsOpts)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	return ws, nil
}

// close stops the executor (which ends the calls still running), then waits for
// the calls' goroutines, if the engine serves calls.
func (en *engine) close() error {
	if en.calls != nil {
		// The calls still running are lost with this process: listed before the
		// executor's stop ends them (calls/journal.go).
		en.calls.StopJournal()
	}
	err := en.exec.Close()
	if en.calls != nil {
		_ = en.calls.Close()
	}
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
