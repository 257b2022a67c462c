package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/internal/runtimefile"
	"github.com/kernelbox/kernelbox/permissions"
)

func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	var ef engineFlags
	ef.register(fs, "none")
	ef.registerTemplates(fs)
	listen := fs.String("listen", "127.0.0.1:8700", "address to listen on: HOST:PORT or unix:PATH")
	token := fs.String("token", os.Getenv("KERNELBOX_TOKEN"), "bearer token required on every request (also KERNELBOX_TOKEN); without it a TCP listener makes a random one and keeps it in a 0600 runtime file for this user's clients")
	var allowedHosts hostList
	fs.Var(&allowedHosts, "allowed-host", "Host name clients use to reach a non-loopback listener (repeatable or comma list); loopback names are always accepted on a loopback listener")
	idle := fs.Duration("conn-idle-timeout", 60*time.Second, "close HTTP keep-alive connections idle this long between requests")
	maxConns := fs.Int("max-conns", defaultMaxConns(), "most HTTP connections open at once (default from the file limit); the last 32 serve only requests with the token and /healthz, and past it new connections are closed at once")
	var nbo httpapi.Options
	fs.Int64Var(&nbo.MaxNotebookBytes, "max-notebook-bytes", httpapi.DefaultMaxNotebookBytes, "largest request to POST /v1/notebooks/run, in bytes; over it the answer is 413 too_large")
	fs.IntVar(&nbo.MaxNotebookCells, "max-notebook-cells", httpapi.DefaultMaxNotebookCells, "most cells in a notebook sent to POST /v1/notebooks/run; over it the answer is 413 too_large")
	fs.IntVar(&nbo.MaxNotebookRuns, "max-notebook-runs", httpapi.DefaultMaxNotebookRuns, "notebooks run at once through POST /v1/notebooks/run; past it the answer is 429 too_many_notebook_runs, at once")
	dash := registerDashboard(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return exitCode{2, "serve takes no arguments: " + strings.Join(fs.Args(), " ")}
	}
	if *maxConns < 2 {
		return exitCode{2, "--max-conns must be at least 2"}
	}
	if nbo.MaxNotebookBytes <= 0 || nbo.MaxNotebookCells <= 0 || nbo.MaxNotebookRuns <= 0 {
		return exitCode{2, "--max-notebook-bytes, --max-notebook-cells and --max-notebook-runs must be positive"}
	}
	log, err := ef.logger(stderr)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	network, addr, err := listenAddr(*listen)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	var approver permissions.Approver
	if stdinIsTerminal() {
		approver = &permissions.PromptApprover{In: os.Stdin, Out: stderr}
	}
	en, err := ef.build(ctx, log, approver)
	if err != nil {
		return err
	}
	defer func() {
		if err := en.close(); err != nil {
			log.Warn("shutdown", "err", err)
		}
	}()
	if network == "unix" {
		_ = os.Remove(addr)
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	if network == "unix" {
		_ = os.Chmod(addr, 0o600)
		defer os.Remove(addr)
	}
	if sn, ok := en.backend.(sessionNetworker); ok && network == "tcp" {
		ln = sessionNetGuard{Listener: ln, nets: sn, log: log}
	}
	generated := *token == ""
	hosts, removeToken, err := serveGuard(network, addr, ln.Addr().String(), token, allowedHosts)
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer removeToken()
	limited := newConnLimiter(ln, *maxConns, log)
	limited.register(en.metrics.Registry())
	// One handler serves every route, /mcp, /metrics and the dashboard
	// included, behind its one guard (httpapi's route table).
	nbo.Token, nbo.Hosts, nbo.Reserve = *token, hosts, limited
	nbo.Workspace, nbo.Logger, nbo.Calls = en.ws, log, en.calls
	nbo.MCP, nbo.Metrics, nbo.Dashboard = mcpHandler(en, log), en.metrics.Handler(), dashboardHandler(dash, log)
	srv := newHTTPServer(httpapi.New(en.exec, nbo), *idle)
	fmt.Fprintf(stdout, "kernelbox serving on %s (backend %s, workspace %s, artifacts %s)\n",
		*listen, en.exec.Backend(), en.ws.Root(), en.ws.ArtifactsDir())
	if network == "tcp" && !dash.off {
		// The token itself is never printed: stdout often ends up in a log.
		where := "the --token you gave"
		if dir, err := runtimefile.Dir(); err == nil && generated {
			where = "the token in " + dir + "; `kernelbox dashboard` prints a link that logs in"
		}
		fmt.Fprintf(stdout, "dashboard: http://%s/ (log in with %s)\n", ln.Addr(), where)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(limited) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing calls in flight and stopping every kernel")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Close the executor first so that long calls end now instead of holding up
	// the HTTP shutdown.
	closeErr := en.exec.Close()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return closeErr
}

// newHTTPServer is the HTTP server of `kernelbox serve` (and of the benchmark's
// http scenario) for h, the API with its guard; it is served on a connLimiter,
// whose reserve h's guard checks (connContext tells it the connection).
func newHTTPServer(h http.Handler, idle time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ConnContext:       connContext,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idle,
	}
}

// listenAddr parses --listen.
func listenAddr(listen string) (network, addr string, err error) {
	if path, ok := strings.CutPrefix(listen, "unix:"); ok {
		if path == "" {
			return "", "", errors.New("--listen unix: needs a path")
		}
		return "unix", path, nil
	}
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return "", "", fmt.Errorf("--listen %q: %v", listen, err)
	}
	return "tcp", listen, nil
}
