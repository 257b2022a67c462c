package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/audit"
	"github.com/kernelbox/kernelbox/backends/remote"
	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/cmd/kernelbox/bench"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/internal/pyfind"
	"github.com/kernelbox/kernelbox/tokens"
)

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", stderr)
	names := fs.String("backends", "local", "comma-separated backends to measure: "+strings.Join(benchBackends(), ", ")+"; docker@RUNTIME runs docker's containers under an OCI runtime, e.g. docker@runsc (gVisor)")
	short := fs.Bool("short", false, "a few iterations only (for CI; numbers are indicative)")
	density := fs.Bool("density", false, "also measure memory at 1, 10 and 50 idle sessions")
	python := fs.String("python", "", "Python with jupyter_client (default: KERNELBOX_PYTHON, /usr/bin/python3, python3)")
	ref := fs.String("reference", "bench/reference.py", "path of the reference script")
	only := fs.String("scenarios", "", "comma-separated scenarios to run: cold, trivial, http, stream, lines, stage, restage, artifacts, warm, analyst, egress, coldresume, durable (default all but durable, which runs only when named: 15 to 25 minutes)")
	durableSessions := fs.Int("durable-sessions", 0, "sessions the durable scenario holds open, at most 20 live (default 500, 30 with --short)")
	adoptSessions := fs.Int("adopt-sessions", 0, "docker sessions the durable scenario keeps across a SIGKILL of serve (default 20, 5 with --short)")
	placement := fs.Int("placement", 0, "instead: place N sessions over --gateways local Jupyter Servers through the remote backend, then on one, then kill a gateway (200 in the README)")
	gateways := fs.Int("gateways", 4, "gateways for --placement")
	verbose := fs.Bool("log", false, "log the backends' and executor's progress (debug level) to stderr, with the backends' timings of each start")
	if err := parse(fs, args); err != nil {
		return err
	}
	py, err := pyfind.Find(*python)
	if err != nil {
		return err
	}
	if *placement > 0 {
		_, err = bench.RunPlacement(ctx, bench.PlacementConfig{Python: py, Open: openGateways, Gateways: *gateways, Sessions: *placement, Out: stdout})
		return err
	}
	measured, err := benchTable(splitList(*names), py)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	// The durable scenario runs this binary's serve to measure adoption; without
	// it that row says it was not measured.
	self, _ := os.Executable()
	_, err = bench.Run(ctx, bench.Config{
		Python:          py,
		Reference:       *ref,
		Backends:        measured,
		Short:           *short,
		Density:         *density,
		Logger:          benchLogger(*verbose, stderr),
		Scenarios:       splitList(*only),
		DurableSessions: *durableSessions,
		AdoptSessions:   *adoptSessions,
		Self:            self,
		DiskQuota:       defaultDiskQuota, // serve's; the warm row measures with it
		Serve:           benchServe,
		Out:             stdout,
	})
	return err
}

// benchBackends names the rows of the backend table the benchmark can measure
// with their defaults.
func benchBackends() []string {
	var names []string
	for _, b := range backends() {
		if b.bench {
			names = append(names, b.name)
		}
	}
	return names
}

// benchTable returns the benchmark's backends named by --backends, from the
// backend table, each built with its defaults and python.
func benchTable(names []string, python string) ([]bench.Backend, error) {
	var out []bench.Backend
	for _, label := range names {
		name, runtime, _ := strings.Cut(label, "@")
		b, err := lookupBackend(name)
		if err != nil || !b.bench || (runtime != "" && !b.containers) {
			return nil, fmt.Errorf("--backends: %q: the benchmark measures %s (docker@RUNTIME for an OCI runtime)", label, strings.Join(benchBackends(), ", "))
		}
		bb := bench.Backend{
			Name: label,
			Open: func(ctx context.Context, log *slog.Logger) (executor.Backend, error) {
				return b.open(ctx, &backendConfig{python: python, runtime: runtime}, log)
			},
			Containers: b.containers,
		}
		if b.keeps { // as serve opens it (stop.go)
			bb.OpenKept = func(ctx context.Context, log *slog.Logger, stateFile string) (executor.Backend, error) {
				return b.open(ctx, &backendConfig{python: python, runtime: runtime, stateFile: stateFile}, log)
			}
		}
		out = append(out, bb)
	}
	return out, nil
}

// openGateways builds the remote backend over the placement run's local
// gateways, each with its own token (which --gateway-token, one token for all,
// cannot say), checked every 500 ms.
func openGateways(ctx context.Context, gws []bench.Gateway, log *slog.Logger) (executor.Backend, error) {
	o := remote.Options{HealthInterval: 500 * time.Millisecond, Logger: log}
	for _, g := range gws {
		o.Gateways = append(o.Gateways, remote.Gateway{URL: g.URL, Token: g.Token})
	}
	return remote.New(ctx, o)
}

// benchServe serves e for the benchmark's http scenario with serve's own
// server: the connection cap, the guard of a loopback TCP listener, the API with
// a calls registry of serve's defaults, scoped tokens and the audit log (in a
// temporary state directory), and a scoped token for every session, whose
// secret it returns.
func benchServe(ln net.Listener, e *executor.Executor, token string) (func(), string, error) {
	log := slog.New(slog.DiscardHandler)
	tok := token
	hosts, remove, err := serveGuard("tcp", ln.Addr().String(), ln.Addr().String(), &tok, nil)
	if err != nil {
		return nil, "", err
	}
	state, err := os.MkdirTemp("", "kernelbox-bench-state-")
	if err != nil {
		remove()
		return nil, "", err
	}
	st, err := tokens.Open(state, tokens.Options{Exists: func(id string) bool { _, err := e.Session(id); return err == nil }})
	if err != nil {
		remove()
		return nil, "", errors.Join(err, os.RemoveAll(state))
	}
	al, err := audit.Open(filepath.Join(state, "audit.log"), audit.Options{})
	if err != nil {
		remove()
		return nil, "", errors.Join(err, os.RemoveAll(state))
	}
	_, scoped, err := st.Mint("bench", tokens.Scope{Sessions: []string{"*"}}, 0)
	if err != nil {
		remove()
		return nil, "", errors.Join(err, al.Close(), os.RemoveAll(state))
	}
	reg := calls.New(e, calls.Options{Logger: log})
	limited := newConnLimiter(ln, defaultMaxConns(), log)
	srv := newHTTPServer(httpapi.New(e, httpapi.Options{Token: token, Hosts: hosts, Reserve: limited, Calls: reg, Logger: log, Tokens: st, Audit: al}), 60*time.Second)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(limited) }()
	return func() {
		_ = srv.Close()
		<-done
		_ = reg.Close()
		_ = st.Close()
		_ = al.Close()
		_ = os.RemoveAll(state)
		remove()
	}, scoped, nil
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

// benchLogger is the bench's progress log: stderr at debug level with --log,
// else nothing.
func benchLogger(on bool, stderr io.Writer) *slog.Logger {
	if !on {
		return nil
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
