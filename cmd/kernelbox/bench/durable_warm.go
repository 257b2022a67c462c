package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// warmTemplateName is the template of the durable scenario's warm resume rows: a
// pool of one warm kernel, which a hibernated session's resume takes (its files
// move into the warm kernel's directory) instead of starting a kernel. The size
// rows' sessions are of templates without a pool: their resume rows are cold
// starts, measured as before.
const warmTemplateName = "pooled"

// warmTemplate is the template of the warm resume rows (1 GiB of memory on a
// backend of containers: the rows go up to 100 MiB).
func warmTemplate(containers bool) executor.Template {
	t := executor.Template{Name: warmTemplateName, Description: "one warm kernel, for the warm resume rows", Warm: 1}
	if containers {
		t.Memory = 1 << 30
	}
	return t
}

// warmSizes are the namespaces whose resume is measured with a warm kernel too.
func warmSizes(short bool) []durableSize {
	if short {
		return []durableSize{floatSize(10)}
	}
	return []durableSize{floatSize(10), floatSize(100)}
}

// warmRounds is how many times each warm resume is measured.
const warmRounds = 3

// warmResumeOne hibernates and resumes a session of the warm template warmRounds
// times, each resume with the pool's kernel ready, and checks the digest after each.
func (r *runner) warmResumeOne(ctx context.Context, e *executor.Executor, id string, sz durableSize) ([]Row, error) {
	defer func() { _ = e.CloseSession(context.WithoutCancel(ctx), id) }()
	req := func(code string) api.Request {
		return api.Request{SessionID: id, Template: warmTemplateName, Code: code, Timeout: 10 * time.Minute}
	}
	if _, _, err := r.exec(ctx, e, req(sz.build)); err != nil {
		return nil, fmt.Errorf("build the namespace: %w", err)
	}
	before, _, err := r.exec(ctx, e, req(sz.digest))
	if err != nil {
		return nil, fmt.Errorf("digest before: %w", err)
	}
	var took50 []float64
	var restoreMS int64
	for range warmRounds {
		if _, err := e.Hibernate(ctx, id); err != nil {
			return nil, fmt.Errorf("hibernate: %w", err)
		}
		if err := waitWarmReady(ctx, e); err != nil {
			return nil, err
		}
		res, took, err := r.resumeChecked(ctx, e, req(sz.digest), before.Result)
		if err != nil {
			return nil, err
		}
		took50 = append(took50, ms(took))
		restoreMS = max(restoreMS, res.StateRestored.TookMS)
	}
	lo, hi := minMax(took50)
	return []Row{{Name: fmt.Sprintf("%s: resume %s (warm kernel + restore)", r.backend, sz.label), N: len(took50),
		KB50: percentile(took50, .5), KB99: hi,
		Note: fmt.Sprintf("the template's warm pool had a kernel ready; %d resumes, %.0f to %.0f ms; restore in kernel up to %d ms; digest equal each time",
			len(took50), lo, hi, restoreMS)}}, nil
}

// waitWarmReady waits up to 3 minutes for the warm template's pool to hold a kernel.
func waitWarmReady(ctx context.Context, e *executor.Executor) error {
	deadline := time.Now().Add(3 * time.Minute)
	for e.WarmReadyOf(warmTemplateName) == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the warm pool of template %q held no kernel after 3 minutes", warmTemplateName)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// minMax returns the smallest and largest of v (zeros when empty).
func minMax(v []float64) (lo, hi float64) {
	for i, x := range v {
		if i == 0 || x < lo {
			lo = x
		}
		if i == 0 || x > hi {
			hi = x
		}
	}
	return lo, hi
}
