package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/httpapi"

	"github.com/kernelbox/kernelbox/internal/bench"
	"github.com/kernelbox/kernelbox/internal/pyfind"
)

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", stderr)
	backends := fs.String("backends", "local", "comma-separated backends to measure: local, docker")
	short := fs.Bool("short", false, "a few iterations only (for CI; numbers are indicative)")
	density := fs.Bool("density", false, "also measure memory at 1, 10 and 50 idle sessions")
	python := fs.String("python", "", "Python with jupyter_client (default: KERNELBOX_PYTHON, /usr/bin/python3, python3)")
	ref := fs.String("reference", "bench/reference.py", "path of the reference script")
	only := fs.String("scenarios", "", "comma-separated scenarios to run: cold, trivial, http, stream, lines, stage, restage, artifacts, warm, analyst (default all)")
	placement := fs.Int("placement", 0, "instead: place N sessions over --gateways local Jupyter Servers through the remote backend, then on one, then kill a gateway (200 in the README)")
	gateways := fs.Int("gateways", 4, "gateways for --placement")
	if err := parse(fs, args); err != nil {
		return err
	}
	py, err := pyfind.Find(*python)
	if err != nil {
		return err
	}
	if *placement > 0 {
		_, err = bench.RunPlacement(ctx, bench.PlacementConfig{Python: py, Gateways: *gateways, Sessions: *placement, Out: stdout})
		return err
	}
	_, err = bench.Run(ctx, bench.Config{
		Python:    py,
		Reference: *ref,
		Backends:  splitList(*backends),
		Short:     *short,
		Density:   *density,
		Scenarios: splitList(*only),
		Serve:     benchServe,
		Out:       stdout,
	})
	return err
}

// benchServe serves e for the benchmark's http scenario with serve's own
// server: the connection cap, the guard of a loopback TCP listener, the API with
// a calls registry of serve's defaults.
func benchServe(ln net.Listener, e *executor.Executor, token string) (func(), error) {
	log := slog.New(slog.DiscardHandler)
	tok := token
	hosts, remove, err := serveGuard("tcp", ln.Addr().String(), ln.Addr().String(), &tok, nil)
	if err != nil {
		return nil, err
	}
	reg := calls.New(e, calls.Options{Logger: log})
	limited := newConnLimiter(ln, defaultMaxConns(), log)
	srv := newHTTPServer(httpapi.New(e, httpapi.Options{Token: token, Hosts: hosts, Reserve: limited, Calls: reg, Logger: log}), 60*time.Second)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(limited) }()
	return func() {
		_ = srv.Close()
		<-done
		_ = reg.Close()
		remove()
	}, nil
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
