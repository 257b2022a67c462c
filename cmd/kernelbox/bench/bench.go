// Package bench is the harness of `kernelbox bench`: it measures kernelbox against
// references measured in the same run, interleaved, because the machines it runs on
// are shared and noisy: only ratios measured side by side mean anything. The
// reference for kernel work is bench/reference.py (at the top of the repository),
// which does the same work straight over ZMQ with jupyter_client; for file work it
// is a plain copy. Start reading at [Run].
//
// It drives an executor and knows no backend: the command hands it each backend to
// measure as a [Backend] built from its backend table, and the HTTP server to
// measure as a [ServeFunc].
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// Config selects what to measure.
type Config struct {
	// Python runs the reference script.
	Python string
	// Reference is the path of bench/reference.py.
	Reference string
	// Backends to measure, in order.
	Backends []Backend
	// Short runs a few iterations of each scenario (for CI, so the benchmark
	// cannot rot); the numbers are then only indicative.
	Short bool
	// Density also measures memory at 1, 10 and 50 sessions.
	Density bool
	// Scenarios limits the run to these (cold, trivial, http, stream, lines,
	// stage, restage, artifacts, warm, analyst, egress, coldresume, durable).
	// Empty means all but durable, which runs only when named (it takes 15 to
	// 25 minutes).
	Scenarios []string
	// DurableSessions is how many sessions the durable scenario holds open at
	// once, at most 20 of them live. Defaults to 500 (30 with Short).
	DurableSessions int
	// AdoptSessions is how many docker sessions the durable scenario's adoption
	// measurement keeps across a SIGKILL of serve. Defaults to 20 (5 with Short).
	AdoptSessions int
	// Self is the kernelbox binary: the durable scenario runs its `serve` to
	// measure adoption after a SIGKILL. Without it that row says so.
	Self string
	// Serve serves the HTTP API for the http scenario (`kernelbox bench` passes
	// serve's own server). The http scenario fails without it.
	Serve ServeFunc
	// DiskQuota is the per-session disk quota of the warm scenario's workspace:
	// serve's default (`kernelbox bench` passes it), so that the warm row
	// measures a take as serve does it, a session disk of its own moved with
	// the warm directory when running as root. 0 measures without one.
	DiskQuota int64
	// Out receives the report.
	Out io.Writer
	// Logger receives progress. Defaults to discarding it.
	Logger *slog.Logger
}

// Backend is one backend to measure.
type Backend struct {
	// Name labels the backend's rows.
	Name string
	// Open builds a new instance of the backend: each executor of the run gets its
	// own, which the executor closes.
	Open func(ctx context.Context, log *slog.Logger) (executor.Backend, error)
	// OpenKept is Open for a backend that keeps its sessions across a restart
	// in stateFile, as serve opens it (the warm scenario); nil when the
	// backend keeps nothing (Open is used).
	OpenKept func(ctx context.Context, log *slog.Logger, stateFile string) (executor.Backend, error)
	// Containers says each session is a Docker container on this host, whose
	// memory `docker stats` reports; otherwise the memory rows read the RSS of
	// this process's kernel children.
	Containers bool
}

// Row is one measured scenario.
type Row struct {
	Name     string
	N        int
	KB50     float64 // kernelbox p50, ms
	KB99     float64
	Ref50    float64 // reference p50, ms (0: no reference)
	Ref99    float64
	RefLabel string
	Note     string
}

// Ratio is kernelbox p50 over reference p50.
func (r Row) Ratio() float64 {
	if r.Ref50 == 0 {
		return 0
	}
	return r.KB50 / r.Ref50
}

// Run measures and prints the report.
func Run(ctx context.Context, c Config) ([]Row, error) {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	ref, err := startReference(ctx, c.Python, c.Reference)
	if err != nil {
		return nil, err
	}
	defer ref.close()
	tmp, err := os.MkdirTemp("", "kernelbox-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var rows []Row
	for _, b := range c.Backends {
		r := &runner{c: c, ref: ref, spec: b, backend: b.Name, dir: filepath.Join(tmp, b.Name)}
		got, err := r.run(ctx)
		rows = append(rows, got...)
		if err != nil {
			// What was measured is printed still: a run can take 25 minutes.
			print(c.Out, rows)
			return rows, fmt.Errorf("%s: %w", b.Name, err)
		}
	}
	print(c.Out, rows)
	return rows, nil
}

// runner measures one backend.
type runner struct {
	c       Config
	ref     *reference
	spec    Backend
	backend string // spec.Name
	dir     string
	data    string
}

func (r *runner) iters(short, long int) int {
	if r.c.Short {
		return short
	}
	return long
}

// newExecutor builds an executor on the runner's backend with a warm pool of warm
// kernels of the default template, and templates. Each gets a workspace of its own,
// as a scenario's executor may run beside the runner's.
func (r *runner) newExecutor(ctx context.Context, warm int, templates ...executor.Template) (*executor.Executor, *workspace.Manager, error) {
	return r.newExecutorWith(ctx, func(o *executor.Options) { o.Warm, o.Templates = warm, templates })
}

// newExecutorWith builds an executor on the runner's backend with the benchmark's
// options (64 sessions, no warm pool), changed by set.
func (r *runner) newExecutorWith(ctx context.Context, set func(*executor.Options)) (*executor.Executor, *workspace.Manager, error) {
	return r.newExecutorOn(ctx, setup{exec: set})
}

// setup changes what newExecutorOn builds: the workspace's options, the
// backend (Backend.Open when nil) and the executor's options.
type setup struct {
	ws   func(*workspace.Options)
	open func(ctx context.Context, log *slog.Logger) (executor.Backend, error)
	exec func(*executor.Options)
}

// newExecutorOn is newExecutorWith with the workspace and the backend chosen
// by su too.
func (r *runner) newExecutorOn(ctx context.Context, su setup) (*executor.Executor, *workspace.Manager, error) {
	r.data = filepath.Join(r.dir, "data")
	if err := os.MkdirAll(r.data, 0o755); err != nil {
		return nil, nil, err
	}
	root, err := os.MkdirTemp(r.dir, "ws-")
	if err != nil {
		return nil, nil, err
	}
	wo := workspace.Options{Root: root}
	if su.ws != nil {
		su.ws(&wo)
	}
	ws, err := workspace.New(wo)
	if err != nil {
		return nil, nil, err
	}
	open := su.open
	if open == nil {
		open = r.spec.Open
	}
	b, err := open(ctx, r.c.Logger)
	if err != nil {
		ws.Close()
		return nil, nil, err
	}
	o := executor.Options{
		Backend:   b,
		Workspace: ws,
		Permissions: &permissions.Engine{
			Policy: permissions.DefaultPolicy(),
			Vars:   permissions.Vars{Workdir: r.data, Home: filepath.Join(r.dir, "home"), Artifacts: ws.ArtifactsDir()},
		},
		MaxStreamBytes: 16 << 20,
		MaxSessions:    64,
		Logger:         r.c.Logger,
	}
	if su.exec != nil {
		su.exec(&o)
	}
	e, err := executor.New(o)
	if err != nil {
		_ = b.Close(ctx)
		ws.Close()
		return nil, nil, err
	}
	return e, ws, nil
}

func (r *runner) run(ctx context.Context) ([]Row, error) {
	e, ws, err := r.newExecutor(ctx, 0)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	defer e.Close()
	var rows []Row
	one := func(f func(context.Context, *executor.Executor) (Row, error)) func(context.Context, *executor.Executor) ([]Row, error) {
		return func(ctx context.Context, e *executor.Executor) ([]Row, error) {
			row, err := f(ctx, e)
			if err != nil {
				return nil, err
			}
			return []Row{row}, nil
		}
	}
	for _, sc := range []struct {
		name string
		run  func(context.Context, *executor.Executor) ([]Row, error)
	}{
		{"cold", one(r.coldStart)}, {"trivial", one(r.trivial)}, {"http", r.httpTrivial}, {"stream", one(r.stream)}, {"lines", one(r.lines)},
		{"stage", one(r.stage)}, {"restage", one(r.restage)}, {"artifacts", one(r.artifacts)},
		{"warm", one(func(ctx context.Context, _ *executor.Executor) (Row, error) { return r.warmStart(ctx) })},
		{"analyst", func(ctx context.Context, _ *executor.Executor) ([]Row, error) { return r.analyst(ctx) }},
		{"durable", func(ctx context.Context, _ *executor.Executor) ([]Row, error) { return r.durable(ctx) }},
		{"egress", one(func(ctx context.Context, _ *executor.Executor) (Row, error) { return r.egressBulk(ctx) })},
		{"coldresume", one(func(ctx context.Context, _ *executor.Executor) (Row, error) { return r.coldResume(ctx) })},
	} {
		if !selected(r.c.Scenarios, sc.name) {
			continue
		}
		got, err := sc.run(ctx, e)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", sc.name, err)
		}
		rows = append(rows, got...)
	}
	// Density runs on its own executor, after this one's kernels are gone.
	e.Close()
	if r.c.Density {
		d, err := r.density(ctx)
		rows = append(rows, d...)
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// selected says whether the scenario name runs when scenarios are asked for: all
// of them when none are, but durable only when named (it takes 15 to 25 minutes).
func selected(scenarios []string, name string) bool {
	if len(scenarios) == 0 {
		return name != "durable"
	}
	return slices.Contains(scenarios, name)
}

func (r *runner) exec(ctx context.Context, e *executor.Executor, req api.Request) (*api.Result, time.Duration, error) {
	t0 := time.Now()
	res, err := e.Execute(ctx, req)
	d := time.Since(t0)
	if err != nil {
		return nil, d, err
	}
	if res.Status != api.StatusOK {
		return res, d, fmt.Errorf("%s: status %s: %+v", req.Code[:min(len(req.Code), 40)], res.Status, res.Error)
	}
	return res, d, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentile returns the p-th percentile (0..1) of v.
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

func print(w io.Writer, rows []Row) {
	if w == nil {
		return
	}
	fmt.Fprintf(w, "%-52s %5s %9s %9s %9s %9s %6s  %s\n", "scenario", "n", "kb p50", "kb p99", "ref p50", "ref p99", "ratio", "reference; note")
	for _, r := range rows {
		ratio, ref50, ref99 := "-", "-", "-"
		if r.Ref50 > 0 {
			ratio = fmt.Sprintf("%.2fx", r.Ratio())
			ref50, ref99 = fmt.Sprintf("%.2f", r.Ref50), fmt.Sprintf("%.2f", r.Ref99)
		}
		kb50, kb99 := "-", "-"
		if r.KB50 > 0 {
			kb50, kb99 = fmt.Sprintf("%.2f", r.KB50), fmt.Sprintf("%.2f", r.KB99)
		}
		note := strings.TrimSpace(r.RefLabel + "; " + r.Note)
		note = strings.Trim(note, "; ")
		fmt.Fprintf(w, "%-52s %5d %9s %9s %9s %9s %6s  %s\n", r.Name, r.N, kb50, kb99, ref50, ref99, ratio, note)
	}
	fmt.Fprintln(w, "times in ms; ratio = kernelbox p50 / reference p50, measured interleaved in this run")
}
