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
	"github.com/kernelbox/kernelbox/jupyterapi"
	"github.com/kernelbox/kernelbox/permissions"
)

func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, o := serveFlagSet(stderr) // serve_flags.go
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := o.serve.check(fs); err != nil {
		return err
	}
	ef, sv := o.engine, &o.serve
	log, err := ef.logger(stderr)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	network, addr, err := listenAddr(sv.listen)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	var approver permissions.Approver
	if stdinIsTerminal() {
		approver = &permissions.PromptApprover{In: os.Stdin, Out: stderr}
	}
	ef.keep = &keepFlags{onStop: sv.onStop} // stop.go: serve's sessions outlive a restart
	en, err := ef.build(ctx, log, approver)
	if err != nil {
		return err
	}
	o.server.serve(en, ef.timeout, log)
	defer func() {
		if err := en.close(); err != nil {
			log.Warn("shutdown", "err", err)
		}
	}()
	st, al, closeAccess, err := sv.access.open(ef.keep.dir(), en, log) // tokens.go
	if err != nil {
		return err
	}
	defer closeAccess()
	ln, removeSocket, err := serveListen(network, addr, en, log)
	if err != nil {
		return err
	}
	defer removeSocket()
	generated := sv.token == ""
	hosts, removeToken, err := serveGuard(network, addr, ln.Addr().String(), &sv.token, sv.allowedHosts)
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer removeToken()
	limited := newConnLimiter(ln, sv.maxConns, log)
	limited.register(en.metrics.Registry())
	// One handler serves every route, /mcp, /metrics and the dashboard
	// included, behind its one guard (httpapi's route table).
	// The flags set the notebook limits (serve_flags.go); the rest is wiring.
	apiOpts := sv.api
	apiOpts.Token, apiOpts.Hosts, apiOpts.Reserve = sv.token, hosts, limited
	apiOpts.Workspace, apiOpts.Logger, apiOpts.Calls = en.ws, log, en.calls
	apiOpts.Tokens, apiOpts.Audit = st, al
	apiOpts.MCP, apiOpts.Metrics, apiOpts.Dashboard = mcpHandler(en, log, st, al), en.metrics.Handler(), dashboardHandler(&sv.dashboard, log)
	apiOpts.Gateway = jupyterapi.New(en.exec, jupyterapi.Options{Logger: log, AllowTyping: sv.gatewayTyping, Tokens: st, Audit: al}) // docs/jupyter-gateway.md
	defer closeGateway(apiOpts.Gateway, log)
	registerGatewayMetrics(en.metrics.Registry(), apiOpts.Gateway.Stats)
	srv := newHTTPServer(httpapi.New(en.exec, apiOpts), sv.connIdle)
	printServing(stdout, sv, en, network, ln.Addr(), generated)
	defer reloadSecretsOnHUP(en.templates, log)()
	return serveUntilDone(ctx, srv, limited, en, log)
}

// serveListen listens where --listen says: a unix socket (removed by the returned
// func) or TCP, whose connections from a session's own network are refused when the
// backend gives sessions networks (sessionNetGuard).
func serveListen(network, addr string, en *engine, log *slog.Logger) (net.Listener, func(), error) {
	if network == "unix" {
		return listenUnix(addr, log) // listen.go
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, nil, err
	}
	if sn, ok := en.backend.(sessionNetworker); ok && network == "tcp" {
		ln = sessionNetGuard{Listener: ln, nets: sn, log: log}
	}
	return ln, func() {}, nil
}

// printServing says where serve listens and, on TCP with the dashboard on, where the
// dashboard is and which token logs in to it (never the token itself: stdout often
// ends up in a log).
func printServing(stdout io.Writer, sv *serveFlags, en *engine, network string, addr net.Addr, generated bool) {
	fmt.Fprintf(stdout, "kernelbox serving on %s (backend %s, workspace %s, artifacts %s)\n",
		sv.listen, en.exec.Backend(), en.ws.Root(), en.ws.ArtifactsDir())
	if network != "tcp" || sv.dashboard.off {
		return
	}
	where := "the --token you gave"
	if dir, err := runtimefile.Dir(); err == nil && generated {
		where = "the token in " + dir + "; `kernelbox dashboard` prints a link that logs in"
	}
	fmt.Fprintf(stdout, "dashboard: http://%s/ (log in with %s)\n", addr, where)
}

// serveUntilDone serves ln until the server fails or ctx ends; then it stops the
// executor (ending the calls in flight) and shuts the server down.
func serveUntilDone(ctx context.Context, srv *http.Server, ln net.Listener, en *engine, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: ending calls in flight; the sessions as --on-stop says")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if en.calls != nil {
		// The calls still running are lost with this process: listed before the
		// executor's stop ends them (calls/journal.go).
		en.calls.StopJournal()
	}
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
