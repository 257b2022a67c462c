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
	"github.com/kernelbox/kernelbox/permissions"
)

func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	var ef engineFlags
	ef.register(fs, "none")
	listen := fs.String("listen", "127.0.0.1:8700", "address to listen on: HOST:PORT or unix:PATH")
	token := fs.String("token", os.Getenv("KERNELBOX_TOKEN"), "bearer token required on every request (also KERNELBOX_TOKEN); required off loopback")
	dash := registerDashboard(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return exitCode{2, "serve takes no arguments: " + strings.Join(fs.Args(), " ")}
	}
	log, err := ef.logger(stderr)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	network, addr, err := listenAddr(*listen, *token)
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
	mux := http.NewServeMux()
	mux.Handle("/", httpapi.New(en.exec, httpapi.Options{Token: *token, Workspace: en.ws, Logger: log, Calls: en.calls}))
	mountMCP(mux, en, *token, log)
	mountMetrics(mux, en, *token)
	mountDashboard(mux, dash, log)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "kernelbox serving on %s (backend %s, workspace %s, artifacts %s)\n",
		*listen, en.exec.Backend(), en.ws.Root(), en.ws.ArtifactsDir())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
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

// listenAddr parses --listen and refuses a non-loopback address without a token.
func listenAddr(listen, token string) (network, addr string, err error) {
	if path, ok := strings.CutPrefix(listen, "unix:"); ok {
		if path == "" {
			return "", "", errors.New("--listen unix: needs a path")
		}
		return "unix", path, nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return "", "", fmt.Errorf("--listen %q: %v", listen, err)
	}
	if token == "" && !isLoopback(host) {
		return "", "", fmt.Errorf("--listen %s is not a loopback address: set --token (or KERNELBOX_TOKEN) so that only clients with the token can run code", listen)
	}
	return "tcp", listen, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
