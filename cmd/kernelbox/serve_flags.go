package main

import (
	"flag"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/httpapi"
)

// serveFlags are serve's own flags, the "Server" group: the listener, its token
// and Host names, the connections, notebooks over HTTP and the dashboard.
type serveFlags struct {
	listen        string
	token         string
	allowedHosts  hostList
	connIdle      time.Duration
	maxConns      int
	api           httpapi.Options // the HTTP API's options the flags set: the notebook limits
	dashboard     dashboardFlags  // dashboard.go
	onStop        string          // keep, hibernate, close; "" = the backend's default (stop.go)
	gatewayTyping bool            // Jupyter clients may type into agents' sessions (jupyterapi.Options.AllowTyping)
	access        accessFlags     // tokens.go: scoped tokens and the audit log
}

// register adds the "Server" group.
func (s *serveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.listen, "listen", "127.0.0.1:8700", "address to listen on: HOST:PORT or unix:PATH")
	fs.StringVar(&s.token, "token", os.Getenv("KERNELBOX_TOKEN"), "bearer token required on every request (also KERNELBOX_TOKEN); without it a TCP listener makes a random one and keeps it in a 0600 runtime file for this user's clients")
	fs.Var(&s.allowedHosts, "allowed-host", "Host name clients use to reach a non-loopback listener (repeatable or comma list); loopback names are always accepted on a loopback listener")
	fs.DurationVar(&s.connIdle, "conn-idle-timeout", 60*time.Second, "close HTTP keep-alive connections idle this long between requests")
	fs.IntVar(&s.maxConns, "max-conns", defaultMaxConns(), "most HTTP connections open at once (default from the file limit); the last 32 serve only requests with the token and /healthz, and past it new connections are closed at once")
	nb := &s.api
	fs.Int64Var(&nb.MaxNotebookBytes, "max-notebook-bytes", httpapi.DefaultMaxNotebookBytes, "largest request to POST /v1/notebooks/run, in bytes; over it the answer is 413 too_large")
	fs.IntVar(&nb.MaxNotebookCells, "max-notebook-cells", httpapi.DefaultMaxNotebookCells, "most cells in a notebook sent to POST /v1/notebooks/run; over it the answer is 413 too_large")
	fs.IntVar(&nb.MaxNotebookRuns, "max-notebook-runs", httpapi.DefaultMaxNotebookRuns, "notebooks run at once through POST /v1/notebooks/run; past it the answer is 429 too_many_notebook_runs, at once")
	fs.StringVar(&s.onStop, "on-stop", "", "what a graceful stop (SIGTERM, SIGINT) does with the live sessions: keep (their kernels and containers run on, and serve started again on this workspace takes them back), hibernate (their variables saved in their directories, listed hibernated at the next start) or close (default: keep for docker, swarm and remote, hibernate for local, close for none; remote keeps only what its gateways keep, and takes the gateway token from the next start's configuration)")
	fs.BoolVar(&s.gatewayTyping, "gateway-allow-typing", false, "let Jupyter clients of the gateway API (/api/kernels) run code in, interrupt, restart and shut down sessions that agents started through /v1, MCP or the CLI; without it they can only watch them")
	s.dashboard.register(fs)
	s.access.register(fs)
}

// check refuses values serve cannot run with, and arguments.
func (s *serveFlags) check(fs *flagSet) error {
	if fs.NArg() > 0 {
		return exitCode{2, "serve takes no arguments: " + strings.Join(fs.Args(), " ")}
	}
	if err := s.access.check(); err != nil {
		return err
	}
	if s.maxConns < 2 {
		return exitCode{2, "--max-conns must be at least 2"}
	}
	if s.onStop != "" {
		if _, err := executor.ParseStopPolicy(s.onStop); err != nil {
			return exitCode{2, "--on-stop: " + err.Error()}
		}
	}
	if s.api.MaxNotebookBytes <= 0 || s.api.MaxNotebookCells <= 0 || s.api.MaxNotebookRuns <= 0 {
		return exitCode{2, "--max-notebook-bytes, --max-notebook-cells and --max-notebook-runs must be positive"}
	}
	return nil
}

// serveOptions are the flags of `kernelbox serve`.
type serveOptions struct {
	engine *engineFlags
	server serverFlags // server.go: calls and MCP
	serve  serveFlags
}

// serveFlagSet returns the flags of `kernelbox serve`, in groups: the engine's,
// the sessions', the calls', MCP's, the server's own and each backend's.
func serveFlagSet(stderr io.Writer) (*flagSet, *serveOptions) {
	fs := newFlags("serve", stderr)
	fs.intro = "Usage: kernelbox serve [flags]\n\nServes the HTTP API (and MCP over HTTP at /mcp) and the dashboard."
	o := &serveOptions{engine: newEngineFlags("none")}
	registerServer(fs, o.engine, &o.server)
	fs.add("Server", o.serve.register)
	o.engine.backends.register(fs)
	return fs, o
}
