package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	var ln net.Listener
	if network == "unix" {
		var remove func()
		if ln, remove, err = listenUnix(addr, log); err != nil { // listen.go
			return err
		}
		defer remove()
	} else if ln, err = net.Listen(network, addr); err != nil {
		return err
	}
	if sn, ok := en.backend.(sessionNetworker); ok && network == "tcp" {
		ln = sessionNetGuard{Listener: ln, nets: sn, log: log}
	}
	generated := *token == ""
	guard, removeToken, err := serveGuard(network, addr, ln.Addr().String(), token, allowedHosts)
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer removeToken()
	mux := http.NewServeMux()
	nbo.Token, nbo.Workspace, nbo.Logger, nbo.Calls = *token, en.ws, log, en.calls
	apiHandler := httpapi.New(en.exec, nbo)
	mux.Handle("/", apiHandler)
	mountMCP(mux, en, *token, log)
	mountMetrics(mux, en, *token)
	mountDashboard(mux, dash, log)
	srv, limited := newHTTPServer(ln, *maxConns, *idle, log, *token, guard, apiHandler, mux)
	limited.register(en.metrics.Registry())
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
// http scenario): at most maxConns connections on ln, the reserve and request
// guards, apiHandler for the file routes first and mux for the rest.
func newHTTPServer(ln net.Listener, maxConns int, idle time.Duration, log *slog.Logger, token string, guard httpapi.GuardOptions, apiHandler http.Handler, mux *http.ServeMux) (*http.Server, *connLimiter) {
	limited := newConnLimiter(ln, maxConns, log)
	return &http.Server{
		Handler:           reserveGuard(limited, token, httpapi.Guard(guard, httpapi.FilesFirst(apiHandler, mux))),
		ConnContext:       connContext,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idle,
	}, limited
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
