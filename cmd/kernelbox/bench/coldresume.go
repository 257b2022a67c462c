package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// coldRounds is how many times the cold resume row hibernates and resumes its
// session (2 with Short).
const coldRounds = 3

// coldResume measures issue 53's cold resume: a session of 100 MiB of float64s
// (10 MiB with Short), of a template without a warm pool, hibernated and
// resumed, so each resume starts a kernel (on docker, a container) and then
// restores; the digest is checked after each. Run on local and docker in one
// run, the two rows are each other's reference.
func (r *runner) coldResume(ctx context.Context) (Row, error) {
	sz := floatSize(100)
	if r.c.Short {
		sz = floatSize(10)
	}
	tmpl := executor.Template{Name: "cold", Description: "no warm pool: each resume starts a kernel"}
	if r.spec.Containers {
		tmpl.Memory = 1 << 30
	}
	e, ws, err := r.newExecutorWith(ctx, func(o *executor.Options) { o.Templates = []executor.Template{tmpl} })
	if err != nil {
		return Row{}, err
	}
	defer ws.Close()
	defer e.Close()
	const id = "cold"
	req := func(code string) api.Request {
		return api.Request{SessionID: id, Template: tmpl.Name, Code: code, Timeout: 10 * time.Minute}
	}
	if _, _, err := r.exec(ctx, e, req(sz.build)); err != nil {
		return Row{}, fmt.Errorf("build the namespace: %w", err)
	}
	before, _, err := r.exec(ctx, e, req(sz.digest))
	if err != nil {
		return Row{}, fmt.Errorf("digest before: %w", err)
	}
	var took, restore []float64
	for range r.iters(2, coldRounds) {
		if _, err := e.Hibernate(ctx, id); err != nil {
			return Row{}, fmt.Errorf("hibernate: %w", err)
		}
		res, d, err := r.resumeChecked(ctx, e, req(sz.digest), before.Result)
		if err != nil {
			return Row{}, err
		}
		took = append(took, ms(d))
		restore = append(restore, float64(res.StateRestored.TookMS))
	}
	lo, hi := minMax(took)
	return Row{Name: fmt.Sprintf("%s: cold resume of a %s session", r.backend, sz.label), N: len(took),
		KB50: percentile(took, .5), KB99: hi,
		Note: fmt.Sprintf("no warm kernel; %d resumes, %.0f to %.0f ms, of which the restore in the kernel %.0f ms (p50); digest equal each time; goal ≤ 2 s",
			len(took), lo, hi, percentile(restore, .5))}, nil
}
