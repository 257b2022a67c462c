// Package local is the backend that runs kernels as local processes: one Jupyter
// Server child per executor, listening on a unix socket in a private 0700 directory
// with a random token, and one kernel per session whose working directory is the
// session directory.
//
// It is NOT a sandbox. Code runs with the rights of the user running kernelbox: it
// can read and write that user's files and reach the network. Use the docker backend
// for untrusted code.
//
// The kernels' channels are unix sockets in that directory (no TCP port), and the
// token is in a 0600 config file there (not on a command line). The server runs under
// a supervisor process, a child subreaper that kills every process of the tree (the
// server, its kernels and all they started, setsid daemons included) when kernelbox
// exits, even when it is killed with SIGKILL; the next start removes the runtime
// directory such a kernelbox left. Start reading at [New].
package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/jupyterproc"
	"github.com/kernelbox/kernelbox/internal/procwatch"
	"github.com/kernelbox/kernelbox/internal/pyfind"
	"github.com/kernelbox/kernelbox/internal/serverflags"
)

// Options configures the local backend. The zero value works when a suitable
// Python is installed.
type Options struct {
	// Python is the interpreter to run Jupyter Server and the kernels with. It must
	// import jupyter_server and ipykernel. Defaults to KERNELBOX_PYTHON, then
	// /usr/bin/python3, then python3 on PATH: the first that works.
	Python string

	// ReadyTimeout bounds the server's start. Defaults to 60 seconds.
	ReadyTimeout time.Duration

	// Env is added to the server's and kernels' environment.
	Env []string

	// Logger receives the backend's logs. Defaults to discarding them.
	Logger *slog.Logger
}

// Backend runs one Jupyter Server child process, started on first use and restarted
// if it dies. It is safe for concurrent use.
type Backend struct {
	opts   Options
	log    *slog.Logger
	mu     sync.Mutex
	srv    *jupyterproc.Server
	silent time.Time     // since when srv has not answered its watchdog (zero: it answers)
	stop   chan struct{} // closed by Close: stops the watchdogs
	wg     sync.WaitGroup
	starts int
	closed bool
}

var (
	_ executor.Backend       = (*Backend)(nil)
	_ executor.HealthChecker = (*Backend)(nil)
	_ executor.SpecExplainer = (*Backend)(nil)
)

// New returns a local backend. It checks for a usable Python and removes the runtime
// directories that killed kernelbox processes left behind, but starts nothing.
func New(opts Options) (*Backend, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	py, err := pyfind.Find(opts.Python)
	if err != nil {
		return nil, fmt.Errorf("local backend: %w", err)
	}
	opts.Python = py
	for _, d := range jupyterproc.RemoveStale("") {
		opts.Logger.Info("removed the runtime directory of a dead kernelbox", "dir", d)
	}
	return &Backend{opts: opts, log: opts.Logger, stop: make(chan struct{})}, nil
}

// Applies reports that this backend starts a template's kernelspec (any the host's
// Jupyter offers, such as "ir" with r-cran-irkernel installed); it has no container
// to set an image, limits or an environment on (the executor sets a template's
// environment by code).
func (b *Backend) Applies() executor.SpecFields { return executor.SpecFields{Kernel: true} }

// WhyNot says why this backend cannot apply a template's network allowlist or
// secrets: a local kernel runs as a process of the host, as the host's user.
func (b *Backend) WhyNot(field string) string {
	switch field {
	case "network":
		return "a local kernel is not confined: it reaches whatever the host reaches, so no allowlist can hold"
	case "secrets":
		return "a local kernel runs as your user and could read kernelbox's memory and environment, where the secret is"
	}
	return ""
}

// Name returns "local".
func (b *Backend) Name() string { return "local" }

// Python returns the interpreter in use.
func (b *Backend) Python() string { return b.opts.Python }

// server returns the running server, starting (or restarting) it if needed.
func (b *Backend) server(ctx context.Context) (*jupyterproc.Server, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("local backend is closed")
	}
	if b.srv != nil {
		select {
		case <-b.srv.Done():
			b.log.Warn("jupyter server died; starting a new one", "err", b.srv.ExitErr(), "output", lastLines(b.srv.LogTail(), 5))
			_ = b.srv.Stop(ctx)
			b.srv = nil
		default:
			return b.srv, nil
		}
	}
	if b.starts == 0 {
		b.log.Warn("local backend: code runs UNSANDBOXED, with this user's rights, files and network; use --backend docker for untrusted code")
	}
	srv, err := jupyterproc.Start(ctx, jupyterproc.Options{
		Python:       b.opts.Python,
		RootDir:      "/",
		ReadyTimeout: b.opts.ReadyTimeout,
		Env:          b.opts.Env,
		Logger:       b.log,
	})
	if err != nil {
		return nil, err
	}
	b.starts++
	b.srv, b.silent = srv, time.Time{}
	b.wg.Add(1)
	go b.watch(srv, b.stop)
	b.log.Info("jupyter server started", "pid", srv.Pid(), "python", b.opts.Python)
	return srv, nil
}

// Open places a session on the shared server; its kernel's working directory is
// spec.Dir. (Data mounts were copied into the session by the executor: this backend
// cannot bind-mount.)
func (b *Backend) Open(ctx context.Context, spec executor.SessionSpec) (executor.Placement, error) {
	if !filepath.IsAbs(spec.Dir) {
		return nil, fmt.Errorf("local backend: session dir %q is not absolute", spec.Dir)
	}
	srv, err := b.server(ctx)
	if err != nil {
		return nil, err
	}
	return &placement{srv: srv, path: strings.TrimPrefix(filepath.Clean(spec.Dir), "/"), kernel: serverflags.SpecName(spec.Template.Kernel)}, nil
}

// ServerPID returns the process id of the running Jupyter Server's supervisor (its
// parent, which kills the server's whole tree when it exits), or 0 when none is
// running.
func (b *Backend) ServerPID() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv == nil {
		return 0
	}
	return b.srv.Pid()
}

// Health reports whether the server is running (or can be started).
func (b *Backend) Health(ctx context.Context) error {
	b.mu.Lock()
	srv := b.srv
	b.mu.Unlock()
	if srv == nil {
		return nil // started on first use
	}
	select {
	case <-srv.Done():
		return fmt.Errorf("jupyter server exited (%v); it is restarted on the next call", srv.ExitErr())
	default:
	}
	if why := b.silence(); why != "" {
		return errors.New(why)
	}
	return nil
}

// Close stops the server, which stops its kernels.
func (b *Backend) Close(ctx context.Context) error {
	b.mu.Lock()
	defer b.wg.Wait()
	defer b.mu.Unlock()
	if !b.closed {
		close(b.stop)
	}
	b.closed = true
	if b.srv == nil {
		return nil
	}
	err := b.srv.Stop(ctx)
	b.srv = nil
	return err
}

// placement is a session's kernel on the shared server.
type placement struct {
	srv    *jupyterproc.Server
	path   string
	kernel string // the kernelspec to start (serverflags.SpecName)

	watched procwatch.Holder // the kernel's process, once watched (kernelwatch.go)
}

var (
	_ executor.Diagnoser    = (*placement)(nil)
	_ executor.KernelLogger = (*placement)(nil)
)

func (p *placement) Server() executor.Server {
	return executor.Server{
		Endpoint:   p.srv.Endpoint(),
		KernelName: p.kernel,
		KernelPath: p.path,
	}
}

// Close releases the kernel's process watch: the kernel was shut down by the
// executor, and the server is shared.
func (p *placement) Close(context.Context) error {
	p.watched.Set(nil)
	return nil
}

// Diagnose reports a dead server.
func (p *placement) Diagnose(context.Context) string {
	select {
	case <-p.srv.Done():
		return fmt.Sprintf("the Jupyter server process exited (%v)", p.srv.ExitErr())
	default:
		return ""
	}
}

// KernelLog returns the server's last log lines that concern the kernel.
func (p *placement) KernelLog(_ context.Context, kernelID string) string {
	return serverflags.KernelLines(strings.Split(p.srv.LogTail(), "\n"), kernelID, 12)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
