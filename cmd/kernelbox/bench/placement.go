package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/jupyterproc"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// PlacementConfig selects a placement-at-scale run: Sessions sessions placed by the
// remote backend over Gateways local Jupyter Servers on loopback TCP, then the same
// load on one gateway, then (with more than one) one gateway killed.
type PlacementConfig struct {
	// Python runs the gateways (Jupyter Server) and their kernels.
	Python string
	// Open builds the remote backend over the gateways; the command passes its
	// own wiring, so that the harness imports no backend.
	Open func(ctx context.Context, gateways []Gateway, log *slog.Logger) (executor.Backend, error)
	// Gateways is how many gateways to spread over. Defaults to 4.
	Gateways int
	// Sessions is how many sessions to place. Defaults to 200.
	Sessions int
	// Concurrency is how many sessions start at once. Defaults to 8.
	Concurrency int
	// Out receives the report.
	Out io.Writer
	// Logger receives progress. Defaults to discarding it.
	Logger *slog.Logger
}

// Gateway is one local Jupyter Server the placement run starts: its URL and token.
type Gateway struct {
	URL, Token string
}

// PlacementRow is one measured placement run.
type PlacementRow struct {
	Gateways int
	Sessions int
	// PerGateway counts the kernels each gateway held after placement.
	PerGateway []int
	// First50 and First99 are a new session's time to its first result, ms.
	First50, First99 float64
	// Wall is how long placing every session took.
	Wall time.Duration
	// Failover measures the sessions of a killed gateway: time from the kill to
	// their first successful call elsewhere, min, p50 and max, ms (0: not
	// measured). The sessions are called Concurrency at a time, so the p50 and the
	// max include waiting for a turn; the min is the first session's failover.
	Moved                                int
	FailoverMin, Failover50, FailoverMax float64
	StateLostReported, Calls             int
}

// RunPlacement measures placement over c.Gateways gateways and over one, and prints
// the report.
func RunPlacement(ctx context.Context, c PlacementConfig) ([]PlacementRow, error) {
	if c.Gateways <= 0 {
		c.Gateways = 4
	}
	if c.Sessions <= 0 {
		c.Sessions = 200
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	var rows []PlacementRow
	for _, g := range []int{c.Gateways, 1} {
		row, err := placeOnce(ctx, c, g)
		if err != nil {
			return rows, fmt.Errorf("placement over %d gateways: %w", g, err)
		}
		rows = append(rows, row)
		printPlacement(c.Out, row)
	}
	return rows, nil
}

// fleet is a set of local gateways and an executor placing sessions on them.
type fleet struct {
	servers []*jupyterproc.Server
	clients []*jupyter.Client
	exec    *executor.Executor
	ws      *workspace.Manager
	tmp     string
}

func startFleet(ctx context.Context, c PlacementConfig, n int) (_ *fleet, err error) {
	f := &fleet{}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	if f.tmp, err = os.MkdirTemp("", "kernelbox-placement-"); err != nil {
		return nil, err
	}
	var gws []Gateway
	for i := range n {
		root := filepath.Join(f.tmp, fmt.Sprintf("gw%d", i))
		if err := os.MkdirAll(root, 0o700); err != nil {
			return nil, err
		}
		s, err := jupyterproc.Start(ctx, jupyterproc.Options{Python: c.Python, RootDir: root, TCPAddr: "127.0.0.1:0", Logger: c.Logger})
		if err != nil {
			return nil, err
		}
		f.servers = append(f.servers, s)
		cl, err := jupyter.NewClient(s.Endpoint(), nil)
		if err != nil {
			return nil, err
		}
		f.clients = append(f.clients, cl)
		gws = append(gws, Gateway{URL: s.Endpoint().URL, Token: s.Endpoint().Token})
	}
	b, err := c.Open(ctx, gws, c.Logger)
	if err != nil {
		return nil, err
	}
	if f.ws, err = workspace.New(workspace.Options{Root: filepath.Join(f.tmp, "ws")}); err != nil {
		_ = b.Close(ctx)
		return nil, err
	}
	f.exec, err = executor.New(executor.Options{
		Backend: b, Workspace: f.ws, MaxSessions: c.Sessions + 8, StartTimeout: 5 * time.Minute,
		Permissions: &permissions.Engine{Policy: permissions.DefaultPolicy(), Vars: permissions.Vars{Workdir: f.tmp, Home: f.tmp, Artifacts: f.ws.ArtifactsDir()}},
		Logger:      c.Logger,
	})
	if err != nil {
		_ = b.Close(ctx)
		return nil, err
	}
	return f, nil
}

func (f *fleet) close() {
	var errs []error
	if f.exec != nil {
		errs = append(errs, f.exec.Close()) // also closes the backend
	}
	if f.ws != nil {
		f.ws.Close()
	}
	for _, s := range f.servers {
		errs = append(errs, s.Stop(context.Background()))
	}
	if f.tmp != "" {
		errs = append(errs, os.RemoveAll(f.tmp))
	}
	_ = errors.Join(errs...)
}

func placeOnce(ctx context.Context, c PlacementConfig, gateways int) (PlacementRow, error) {
	row := PlacementRow{Gateways: gateways, Sessions: c.Sessions}
	f, err := startFleet(ctx, c, gateways)
	if err != nil {
		return row, err
	}
	defer f.close()
	c.Logger.Info("placing sessions", "sessions", c.Sessions, "gateways", gateways)
	start := time.Now()
	firsts, err := f.runAll(ctx, c, sessionIDs(c.Sessions), "x = 41\nx + 1", "42")
	if err != nil {
		return row, err
	}
	row.Wall = time.Since(start)
	row.First50, row.First99 = percentile(firsts, 0.50), percentile(firsts, 0.99)
	if row.PerGateway, err = f.load(ctx); err != nil {
		return row, err
	}
	if gateways > 1 {
		err = f.failover(ctx, c, &row)
	}
	return row, err
}

func sessionIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("p%03d", i)
	}
	return ids
}

// runAll runs code once in each session, c.Concurrency at a time, and returns each
// call's time in ms. Every call must end ok with want as its result.
func (f *fleet) runAll(ctx context.Context, c PlacementConfig, ids []string, code, want string) ([]float64, error) {
	times := make([]float64, len(ids))
	errs := make([]error, len(ids))
	sem := make(chan struct{}, c.Concurrency)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			t0 := time.Now()
			res, err := f.exec.Execute(ctx, api.Request{SessionID: id, Code: code, Timeout: 5 * time.Minute})
			times[i] = ms(time.Since(t0))
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("session %s: %w", id, err)
			case res.Status != api.StatusOK || res.Result != want:
				errs[i] = fmt.Errorf("session %s: status %s, result %q, error %+v", id, res.Status, res.Result, res.Error)
			}
		})
	}
	wg.Wait()
	return times, errors.Join(errs...)
}

// load counts the kernels on each gateway.
func (f *fleet) load(ctx context.Context) ([]int, error) {
	out := make([]int, len(f.clients))
	for i, cl := range f.clients {
		ks, err := cl.Kernels(ctx)
		if err != nil {
			return nil, fmt.Errorf("list kernels of gateway %d: %w", i, err)
		}
		out[i] = len(ks)
	}
	return out, nil
}

// failover kills the busiest gateway's server (SIGKILL of its process group, so its
// kernels die with it), then calls every session of that gateway until the call
// succeeds elsewhere, and records how long each took from the kill.
func (f *fleet) failover(ctx context.Context, c PlacementConfig, row *PlacementRow) error {
	victim := 0
	for i, n := range row.PerGateway {
		if n > row.PerGateway[victim] {
			victim = i
		}
	}
	ks, err := f.clients[victim].Kernels(ctx)
	if err != nil {
		return err
	}
	onVictim := map[string]bool{}
	for _, k := range ks {
		onVictim[k.ID] = true
	}
	var moved []string
	for _, s := range f.exec.Sessions() {
		if onVictim[s.KernelID] {
			moved = append(moved, s.ID)
		}
	}
	row.Moved = len(moved)
	c.Logger.Info("killing a gateway", "gateway", victim, "sessions", len(moved))
	kill := time.Now()
	if err := syscall.Kill(-f.servers[victim].Pid(), syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill gateway: %w", err)
	}
	times := make([]float64, len(moved))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, c.Concurrency)
	for i, id := range moved {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			calls, lost := f.untilOK(ctx, id)
			times[i] = ms(time.Since(kill))
			mu.Lock()
			row.Calls += calls
			if lost {
				row.StateLostReported++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	row.Failover50, row.FailoverMax = percentile(times, 0.50), slices.Max(append(times, 0))
	row.FailoverMin = slices.Min(append(times, row.FailoverMax))
	return nil
}

// untilOK calls the session until a call succeeds (at most 20 tries) and reports how
// many calls it took and whether one reported state_lost.
func (f *fleet) untilOK(ctx context.Context, id string) (calls int, lost bool) {
	for calls < 20 && ctx.Err() == nil {
		calls++
		res, err := f.exec.Execute(ctx, api.Request{SessionID: id, Code: "1 + 1", Timeout: time.Minute})
		if err == nil {
			lost = lost || res.StateLost
			if res.Status == api.StatusOK {
				return calls, lost
			}
		}
	}
	return calls, lost
}

func printPlacement(w io.Writer, r PlacementRow) {
	if w == nil {
		return
	}
	fmt.Fprintf(w, "placement: %d sessions over %d gateway(s): kernels per gateway %v; first result p50 %.0f ms, p99 %.0f ms; all placed in %.1f s\n",
		r.Sessions, r.Gateways, r.PerGateway, r.First50, r.First99, r.Wall.Seconds())
	if r.Moved > 0 {
		fmt.Fprintf(w, "  failover: killed a gateway holding %d sessions; each got a working call elsewhere after min %.0f ms, p50 %.0f ms, max %.0f ms from the kill (%d calls, %d reported state_lost)\n",
			r.Moved, r.FailoverMin, r.Failover50, r.FailoverMax, r.Calls, r.StateLostReported)
	}
}
