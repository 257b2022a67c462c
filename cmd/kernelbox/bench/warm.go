package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/workspace"
)

// warmGap is the pause between two sessions of the warm scenario, as in
// issue 53's measurement: the refill of the last take is over by then.
const warmGap = 4 * time.Second

// warmStart measures a new session's first result from a warm pool of 2 as
// serve takes one: the workspace with serve's default disk quota (Config.
// DiskQuota: as root, each warm directory a loop-mounted disk of its own), the
// executor with a state directory (the kept-sessions state file and the calls
// journal) and the backend with its state file. Sessions begin warmGap apart,
// each once the pool is full again. The reference is the second call of the
// same session: the same code on the same kernel once the session exists, so
// the ratio is what taking the warm kernel adds to a call.
func (r *runner) warmStart(ctx context.Context) (Row, error) {
	state, err := os.MkdirTemp(r.dir, "state-")
	if err != nil {
		return Row{}, err
	}
	su := setup{
		ws:   func(o *workspace.Options) { o.DiskQuota = r.c.DiskQuota },
		exec: func(o *executor.Options) { o.Warm, o.StateDir = 2, state },
	}
	if r.spec.OpenKept != nil {
		su.open = func(ctx context.Context, log *slog.Logger) (executor.Backend, error) {
			return r.spec.OpenKept(ctx, log, filepath.Join(state, "backend.json"))
		}
	}
	e, ws, err := r.newExecutorOn(ctx, su)
	if err != nil {
		return Row{}, err
	}
	defer ws.Close()
	defer e.Close()
	n := r.iters(3, 12)
	var first, second []float64
	next := time.Now()
	for i := 0; i < n; i++ {
		if err := awaitWarm(ctx, e, 2, next); err != nil {
			return Row{}, err
		}
		next = time.Now().Add(warmGap)
		id := fmt.Sprintf("warm%d", i)
		for k, into := range []*[]float64{&first, &second} {
			res, d, err := r.exec(ctx, e, api.Request{SessionID: id, Code: "1 + 1"})
			if err != nil {
				return Row{}, err
			}
			if res.Result != "2" {
				return Row{}, fmt.Errorf("warm: call %d: result %q", k+1, res.Result)
			}
			*into = append(*into, ms(d))
		}
		if err := e.CloseSession(ctx, id); err != nil {
			return Row{}, err
		}
	}
	limit, unenforced := ws.DiskQuota()
	disk := "no disk quota"
	switch {
	case limit > 0 && unenforced == "":
		disk = fmt.Sprintf("disk quota %d GiB, a disk per session", limit>>30)
	case limit > 0:
		disk = fmt.Sprintf("disk quota %d GiB, checked after calls", limit>>30)
	}
	return Row{Name: r.backend + ": new session's first result, warm pool (--warm 2)", N: n,
		KB50: percentile(first, .5), KB99: percentile(first, .99), Ref50: percentile(second, .5), Ref99: percentile(second, .99),
		RefLabel: "2nd call, same session", Note: "goal p50 ≤ 12 ms; " + disk + ", state dir"}, nil
}

// awaitWarm waits until e has want warm kernels ready and it is not before
// not, bounded by 3 minutes.
func awaitWarm(ctx context.Context, e *executor.Executor, want int, not time.Time) error {
	deadline := time.Now().Add(3 * time.Minute)
	for e.WarmReady() < want || time.Now().Before(not) {
		if time.Now().After(deadline) {
			return fmt.Errorf("warm pool: %d of %d kernels ready after 3 minutes", e.WarmReady(), want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
