package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// The figures E2B publishes for pausing and resuming a sandbox with its memory
// (issue 34): there is no same-run reference for hibernation, so the durable rows
// print these beside kernelbox's absolute times.
const (
	e2bPauseSecPerGiB = 4.0
	e2bResumeSec      = 1.0
)

// durableMemory is the docker memory limit of the size rows' sessions: a snapshot
// holds the pickled namespace in the kernel's memory before writing it, and a
// restore reads the file before unpickling it, so 1 GiB of values needs about
// twice that, and some room.
const durableMemory = 4 << 30

// durableSize is one namespace the durable scenario hibernates and resumes.
type durableSize struct {
	label  string // how the rows name it
	build  string // code that makes the namespace in the kernel
	digest string // an expression: the namespace's content digest
}

// floatSize is a namespace of mib MiB of float64s in one NumPy array.
func floatSize(mib int) durableSize {
	return durableSize{
		label:  fmt.Sprintf("%d MiB float64", mib),
		build:  fmt.Sprintf("import numpy as np\na = np.random.default_rng(0).random(%d * 2**20 // 8)", mib),
		digest: "__import__('hashlib').sha256(a.data).hexdigest()",
	}
}

// frameSize is a DataFrame of rows rows, 8 float64 columns and one string column
// of 12-character strings: 1.25 M rows pickle to about 100 MB, the string column
// about a fifth of it.
func frameSize(rows int) durableSize {
	return durableSize{
		label: fmt.Sprintf("DataFrame %s rows, 8 float + 1 str col", countLabel(rows)),
		build: fmt.Sprintf("import numpy as np, pandas as pd\n"+
			"df = pd.DataFrame(np.random.default_rng(0).random((%d, 8)), columns=[f'c{i}' for i in range(8)])\n"+
			"df['s'] = [f'item-{i:07d}' for i in range(%d)]", rows, rows),
		digest: "__import__('hashlib').sha256(__import__('pandas').util.hash_pandas_object(df, index=True).values.tobytes()).hexdigest()",
	}
}

// durableSizes are the namespaces measured: the 10 MB, 100 MB and 1 GB of
// floats and a ~100 MB DataFrame with a string column (with Short, 10 MiB and a
// small frame).
func durableSizes(short bool) []durableSize {
	if short {
		return []durableSize{floatSize(10), frameSize(125_000)}
	}
	return []durableSize{floatSize(10), floatSize(100), floatSize(1024), frameSize(1_250_000)}
}

// countLabel writes a row count as "125 k" or "1.25 M".
func countLabel(n int) string {
	switch {
	case n >= 1_000_000:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", float64(n)/1e6), "0"), ".") + " M"
	case n >= 1_000:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", float64(n)/1e3), "0"), ".") + " k"
	}
	return fmt.Sprint(n)
}

// secPerGiB is a duration spent on bytes, in seconds per GiB (0 for no bytes).
func secPerGiB(d time.Duration, bytes int64) float64 {
	if bytes <= 0 {
		return 0
	}
	return d.Seconds() / (float64(bytes) / (1 << 30))
}

// durable measures what issue 34 asks to show, in one run: hibernate and resume
// time against namespace size, sessions held open with at most 20 live, and (on a
// backend whose sessions are containers) the adoption of sessions after a SIGKILL
// of serve. Every part that cannot be measured says why in its row.
func (r *runner) durable(ctx context.Context) ([]Row, error) {
	rows, err := r.durableSizes(ctx)
	if err != nil {
		return rows, err
	}
	d, err := r.durableDensity(ctx)
	rows = append(rows, d...)
	if err != nil {
		return rows, err
	}
	a, err := r.adoption(ctx)
	return append(rows, a...), err
}

// durableSizes hibernates and resumes each namespace of durableSizes in a
// session of its own, checking that the restored values have the digest they had.
func (r *runner) durableSizes(ctx context.Context) ([]Row, error) {
	var tmpl []executor.Template
	name := ""
	if r.spec.Containers {
		name = "big"
		tmpl = append(tmpl, executor.Template{Name: name, Description: "4 GiB of memory, for the 1 GiB namespace", Memory: durableMemory})
	}
	tmpl = append(tmpl, warmTemplate(r.spec.Containers))
	e, ws, err := r.newExecutorWith(ctx, func(o *executor.Options) { o.Templates = tmpl })
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	defer e.Close()
	var rows []Row
	var bad []error
	for i, sz := range durableSizes(r.c.Short) {
		got, err := r.hibernateOne(ctx, e, fmt.Sprintf("size%d", i), name, sz)
		if err != nil {
			// Never a silent skip: the row says what stopped it.
			got = []Row{{Name: fmt.Sprintf("%s: hibernate + resume %s", r.backend, sz.label),
				Note: "NOT MEASURED: " + clipNote(err.Error())}}
			bad = append(bad, fmt.Errorf("%s: %w", sz.label, err))
		}
		rows = append(rows, got...)
	}
	for i, sz := range warmSizes(r.c.Short) {
		got, err := r.warmResumeOne(ctx, e, fmt.Sprintf("warm%d", i), sz)
		if err != nil {
			got = []Row{{Name: fmt.Sprintf("%s: resume %s (warm kernel + restore)", r.backend, sz.label),
				Note: "NOT MEASURED: " + clipNote(err.Error())}}
			bad = append(bad, fmt.Errorf("%s, warm: %w", sz.label, err))
		}
		rows = append(rows, got...)
	}
	return rows, errors.Join(bad...)
}

// hibernateOne measures one namespace: a hibernate row and a resume row.
func (r *runner) hibernateOne(ctx context.Context, e *executor.Executor, id, tmpl string, sz durableSize) ([]Row, error) {
	defer func() { _ = e.CloseSession(context.WithoutCancel(ctx), id) }()
	req := func(code string) api.Request {
		return api.Request{SessionID: id, Template: tmpl, Code: code, Timeout: 10 * time.Minute}
	}
	if _, _, err := r.exec(ctx, e, req(sz.build)); err != nil {
		return nil, fmt.Errorf("build the namespace: %w", err)
	}
	before, _, err := r.exec(ctx, e, req(sz.digest))
	if err != nil {
		return nil, fmt.Errorf("digest before: %w", err)
	}
	t0 := time.Now()
	info, err := e.Hibernate(ctx, id)
	hib := time.Since(t0)
	if err != nil {
		return nil, fmt.Errorf("hibernate: %w", err)
	}
	if info.Snapshot == nil {
		return nil, fmt.Errorf("hibernate: the session reports no snapshot (state %s)", info.State)
	}
	snap := *info.Snapshot
	res, resume, err := r.resumeChecked(ctx, e, req(sz.digest), before.Result)
	if err != nil {
		return nil, err
	}
	save := time.Duration(snap.TookMS) * time.Millisecond
	restore := time.Duration(res.StateRestored.TookMS) * time.Millisecond
	return []Row{
		{Name: fmt.Sprintf("%s: hibernate %s", r.backend, sz.label), N: 1, KB50: ms(hib), KB99: ms(hib),
			Note: fmt.Sprintf("snapshot %.1f MB, save in kernel %d ms; %.1f s/GiB (%.1f in kernel); no same-run reference: E2B publishes ~%.0f s/GiB to pause",
				float64(snap.Bytes)/1e6, snap.TookMS, secPerGiB(hib, snap.Bytes), secPerGiB(save, snap.Bytes), e2bPauseSecPerGiB)},
		{Name: fmt.Sprintf("%s: resume %s (start + restore)", r.backend, sz.label), N: 1, KB50: ms(resume), KB99: ms(resume),
			Note: fmt.Sprintf("restore in kernel %d ms, %.1f s/GiB; digest equal; no same-run reference: E2B publishes ~%.0f s to resume",
				res.StateRestored.TookMS, secPerGiB(restore, snap.Bytes), e2bResumeSec)},
	}, nil
}

// clipNote shortens an error for a row's note.
func clipNote(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// resumeChecked resumes the hibernated session of digest (a request running the
// namespace's digest code), then checks that something was restored and that the
// digest is want. It returns the resume's answer and how long the resume took.
func (r *runner) resumeChecked(ctx context.Context, e *executor.Executor, digest api.Request, want string) (api.ResumeResult, time.Duration, error) {
	t0 := time.Now()
	res, err := e.Resume(ctx, digest.SessionID)
	took := time.Since(t0)
	if err != nil {
		return res, took, fmt.Errorf("resume: %w", err)
	}
	if res.StateRestored == nil || res.StateLost {
		return res, took, fmt.Errorf("resume: nothing restored (lost: %v, %s)", res.StateLost, res.Reason)
	}
	after, _, err := r.exec(ctx, e, digest)
	if err != nil {
		return res, took, fmt.Errorf("digest after: %w", err)
	}
	if after.Result != want {
		return res, took, fmt.Errorf("the restored namespace differs: digest %s before, %s after", want, after.Result)
	}
	return res, took, nil
}
