// Package jupyterproc starts and stops a Jupyter Server child process the way kernelbox
// runs it: in a private 0700 runtime directory, on a unix socket (or a loopback TCP
// port, for tests of TCP gateways), with a random token kept in a 0600 config file,
// the iopub rate limits off, and a kernelspec whose kernels' channels are unix sockets
// in the runtime directory.
//
// The server runs under a supervisor (supervisor.py), its parent and a child
// subreaper, which kills every process of the tree (kernels, and whatever they
// started, setsid or not) when kernelbox exits, even by SIGKILL: it notices by its
// stdin pipe from kernelbox reaching EOF. Each runtime directory names its owner, and
// Start removes those whose owner died without cleaning up ([RemoveStale]).
//
// Start reading at [Start].
package jupyterproc

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/kernelbox/kernelbox/internal/procs"
	"github.com/kernelbox/kernelbox/internal/serverflags"
	"github.com/kernelbox/kernelbox/jupyter"
)

// supervisorPy is the server's parent process; see supervisor.py.
//
//go:embed supervisor.py
var supervisorPy []byte

const (
	// maxSocketPath is the longest path a unix socket can be bound to on Linux.
	maxSocketPath = 107
	// longestSocket is the longest socket path below the runtime dir: a kernel's
	// output pipe, next to its connection file (see serverflags' kernel launcher).
	longestSocket = "/runtime/kernel-01234567-89ab-cdef-0123-456789abcdef-ipc-pipe"
)

// Options configures one server. Python and RootDir are required.
type Options struct {
	// Python is an interpreter that can import jupyter_server and ipykernel.
	Python string
	// RootDir is the server's root directory; kernel paths are relative to it.
	RootDir string
	// TCPAddr, when set (for example "127.0.0.1:0"), makes the server listen on that
	// loopback address instead of a unix socket. Port 0 picks a free port.
	TCPAddr string
	// ReadyTimeout bounds the wait for the server to answer. Defaults to 60 seconds.
	ReadyTimeout time.Duration
	// Env is added to the server's (and so its kernels') environment.
	Env []string
	// Logger receives the server's lifecycle logs. Defaults to discarding them.
	Logger *slog.Logger
}

// Server is a running Jupyter Server child process. Its methods are safe for
// concurrent use.
type Server struct {
	cmd        *exec.Cmd
	lifeline   *os.File // the supervisor's stdin; closing it kills the tree
	runtimeDir string
	endpoint   jupyter.Endpoint
	log        *slog.Logger
	out        *tailBuffer

	done    chan struct{} // closed when the process has exited
	waitErr error
	stop    sync.Once
}

// Start starts a server and waits until it answers GET /api.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Python == "" || o.RootDir == "" {
		return nil, errors.New("jupyter server: Python and RootDir are required")
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	for _, d := range RemoveStale("") {
		o.Logger.Info("removed the runtime directory of a dead kernelbox", "dir", d)
	}
	// Short and private: a unix socket path must fit in 107 bytes.
	runtimeDir, err := os.MkdirTemp("", runtimePrefix)
	if err != nil {
		return nil, fmt.Errorf("jupyter server: runtime dir: %w", err)
	}
	if err := os.Chmod(runtimeDir, 0o700); err != nil {
		os.RemoveAll(runtimeDir)
		return nil, err
	}
	if len(runtimeDir)+len(longestSocket) > maxSocketPath {
		os.RemoveAll(runtimeDir)
		return nil, fmt.Errorf("jupyter server: runtime dir %s is too long for the kernels' unix sockets (at most %d bytes); set TMPDIR to a shorter directory", runtimeDir, maxSocketPath-len(longestSocket))
	}
	if err := writeOwner(runtimeDir); err != nil {
		os.RemoveAll(runtimeDir)
		return nil, err
	}
	s, err := start(ctx, o, runtimeDir)
	if err != nil {
		os.RemoveAll(runtimeDir)
		return nil, err
	}
	return s, nil
}

func start(ctx context.Context, o Options, runtimeDir string) (*Server, error) {
	cmd, ep, err := serverCommand(o, runtimeDir)
	if err != nil {
		return nil, err
	}
	out := newTailBuffer(64 << 10)
	cmd.Stdout, cmd.Stderr = out, out
	// The supervisor kills the whole tree when this pipe's write end closes, which
	// it does however kernelbox exits.
	lifeline, keep, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("jupyter server: %w", err)
	}
	defer lifeline.Close()
	cmd.Stdin = lifeline
	// Own process group, so Stop reaches the supervisor and the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		keep.Close()
		return nil, fmt.Errorf("jupyter server: start %s: %w", o.Python, err)
	}
	s := &Server{
		cmd:        cmd,
		lifeline:   keep,
		runtimeDir: runtimeDir,
		endpoint:   ep,
		log:        o.Logger.With("pid", cmd.Process.Pid),
		out:        out,
		done:       make(chan struct{}),
	}
	go func() {
		s.waitErr = cmd.Wait()
		keep.Close()
		close(s.done)
	}()
	if err := s.waitReady(ctx, o.ReadyTimeout); err != nil {
		_ = s.Stop(context.Background())
		return nil, err
	}
	s.log.Debug("jupyter server ready", "endpoint", ep.URL+ep.Socket)
	return s, nil
}

// serverCommand writes what the server needs into runtimeDir (kernelspec,
// launcher, supervisor, the token's config file) and returns the command that
// starts it under its supervisor, and how to reach it once it runs.
func serverCommand(o Options, runtimeDir string) (*exec.Cmd, jupyter.Endpoint, error) {
	dataDir := filepath.Join(runtimeDir, "data")
	if err := serverflags.WriteKernelSpec(dataDir, o.Python); err != nil {
		return nil, jupyter.Endpoint{}, err
	}
	token, err := randomToken()
	if err != nil {
		return nil, jupyter.Endpoint{}, err
	}
	cfg := serverflags.Config{
		Token:         token,
		RootDir:       o.RootDir,
		AllowRoot:     os.Geteuid() == 0,
		DefaultKernel: serverflags.KernelName,
	}
	ep := jupyter.Endpoint{Token: token}
	if o.TCPAddr != "" {
		host, port, err := freeAddr(o.TCPAddr)
		if err != nil {
			return nil, ep, err
		}
		if cfg.Port, err = strconv.Atoi(port); err != nil {
			return nil, ep, fmt.Errorf("jupyter server: port %q: %w", port, err)
		}
		cfg.IP = host
		ep.URL = "http://" + net.JoinHostPort(host, port)
	} else {
		cfg.Socket = filepath.Join(runtimeDir, "j.sock")
		ep.Socket = cfg.Socket
	}
	script, err := serverflags.WriteLauncher(runtimeDir)
	if err != nil {
		return nil, ep, err
	}
	// The token goes in a 0600 config file, never on the command line, which every
	// user of the host can read in /proc/PID/cmdline.
	configDir := filepath.Join(runtimeDir, "config")
	if err := writeTokenConfig(configDir, token); err != nil {
		return nil, ep, err
	}
	supervisor := filepath.Join(runtimeDir, "supervisor.py")
	if err := os.WriteFile(supervisor, supervisorPy, 0o444); err != nil {
		return nil, ep, fmt.Errorf("jupyter server: %w", err)
	}
	args := append([]string{"-Xfrozen_modules=off", supervisor, o.Python, "-Xfrozen_modules=off", script}, serverflags.WithoutToken(serverflags.Args(cfg))...)
	// The kernels' channels are unix sockets next to their connection files, in
	// runtimeDir/runtime: with the default TCP transport they listen on loopback
	// ports that any local user can connect to (an iopub subscriber sees every
	// cell's code and output). jupyter_client names them after the connection file
	// (an absolute path here), so they stay inside the 0700 runtime directory.
	args = append(args, "--KernelManager.transport=ipc")
	cmd := exec.Command(o.Python, args...)
	cmd.Dir = o.RootDir
	cmd.Env = append(os.Environ(),
		"JUPYTER_RUNTIME_DIR="+filepath.Join(runtimeDir, "runtime"),
		"JUPYTER_DATA_DIR="+dataDir,
		"JUPYTER_CONFIG_DIR="+configDir,
		"JUPYTER_PATH="+dataDir,
		"JUPYTER_PLATFORM_DIRS=1",
		"IPYTHONDIR="+filepath.Join(runtimeDir, "ipython"),
		"MPLCONFIGDIR="+filepath.Join(runtimeDir, "mpl"),
		"MPLBACKEND=Agg",
		"PYDEVD_DISABLE_FILE_VALIDATION=1",
		"PYTHONNOUSERSITE=1",
		// Marks the server and its kernels as ours even after reparenting, so that
		// tests and leak checks can count them from the OS.
		procs.OwnerEnv+"="+strconv.Itoa(os.Getpid()),
	)
	cmd.Env = append(cmd.Env, o.Env...)
	return cmd, ep, nil
}

// waitReady polls GET /api until it answers, the process exits or time runs out.
func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := jupyter.NewClient(s.endpoint, &jupyter.ClientOptions{Timeout: 2 * time.Second})
	if err != nil {
		return err
	}
	defer c.CloseIdle()
	delay := 20 * time.Millisecond
	for {
		if _, err := c.Version(ctx); err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("jupyter server exited before it was ready (%v); its output:\n%s", s.waitErr, s.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("jupyter server not ready after %s; its output:\n%s", timeout, s.LogTail())
		case <-time.After(delay):
		}
		if delay < 200*time.Millisecond {
			delay *= 2
		}
	}
}

// Endpoint returns how to reach the server.
func (s *Server) Endpoint() jupyter.Endpoint { return s.endpoint }

// Pid returns the process id of the server's supervisor, its parent (also their
// process group id). Killing it kills the server.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// RuntimeDir returns the server's private 0700 directory, removed by Stop.
func (s *Server) RuntimeDir() string { return s.runtimeDir }

// Done is closed when the server process has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// ExitErr returns how the process exited; valid after Done is closed.
func (s *Server) ExitErr() error {
	<-s.done
	return s.waitErr
}

// LogTail returns the last lines the server wrote to stdout and stderr.
func (s *Server) LogTail() string { return s.out.String() }

// Stop asks the server to shut down (SIGTERM: it stops its kernels, and its
// supervisor kills what they left running after 8 seconds), waits until ctx is done
// or 10 seconds pass, then has the supervisor kill the tree at once, kills the
// process group if that did not end it within 5 seconds, and removes the runtime
// directory.
func (s *Server) Stop(ctx context.Context) error {
	s.stop.Do(func() {
		pgid := s.cmd.Process.Pid
		_ = syscall.Kill(pgid, syscall.SIGTERM) // the supervisor passes it on
		t := time.NewTimer(10 * time.Second)
		defer t.Stop()
		select {
		case <-s.done:
		case <-ctx.Done():
		case <-t.C:
		}
		s.lifeline.Close()
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-s.done
		os.RemoveAll(s.runtimeDir)
	})
	return nil
}

// writeTokenConfig writes dir/jupyter_server_config.json (0600) with the token.
func writeTokenConfig(dir, token string) error {
	body, err := serverflags.TokenConfig(token)
	if err == nil {
		err = os.Mkdir(dir, 0o700)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "jupyter_server_config.json"), body, 0o600)
	}
	if err != nil {
		return fmt.Errorf("jupyter server: config: %w", err)
	}
	return nil
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// freeAddr resolves a loopback host:port, picking a free port for port 0.
func freeAddr(addr string) (string, string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("jupyter server: listen address %q: %w", addr, err)
	}
	if port != "0" && port != "" {
		return host, port, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", "", err
	}
	defer l.Close()
	return host, strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if i := bytes.IndexByte(b, '\n'); len(b) == t.max && i >= 0 {
		b = b[i+1:]
	}
	return string(bytes.TrimSpace(b))
}
