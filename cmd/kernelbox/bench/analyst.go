package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// The analyst scenario (issue 24): a data analyst's first cell on a fresh session,
// which imports pandas and matplotlib and reads a CSV, measured four ways on one
// executor with four templates, interleaved:
//
//   - cold: the default template, no warm pool: the container (docker), the
//     kernel and the imports are all started by the call;
//   - warm: a warm pool and no preload: the kernel is started, the imports happen
//     in the call;
//   - imports: a warm pool whose preload imports pandas and matplotlib.pyplot;
//   - primed: a warm pool whose preload also reads a small CSV, describes it and
//     formats the result as a cell's result is formatted, once, in case the first
//     read_csv, describe and DataFrame display of a process cost more than later
//     ones (on this project's machines the difference stayed within the noise).
//
// The reference is the same cell over ZMQ (jupyter_client) in a kernel that has
// already run it: the floor of the cell's own work. Before each measurement the
// pools are full again, so that no warm start (a container, a kernel, a preload's
// imports) runs beside a measured call. Then the memory of warm kernels of each
// pool is read: the kernel's RSS, and on docker its container's memory.
const (
	analystCell = "import pandas as pd, matplotlib.pyplot as plt; df = pd.read_csv('inputs/benchmarks.csv'); df.describe()"

	// analystPreload imports what the analyst's cells use.
	analystPreload = "import pandas as pd\nimport matplotlib.pyplot as plt"
	// analystPrimedPreload is analystPreload, then one small read_csv, describe
	// and display, in case the first ones of a process cost more than later ones.
	analystPrimedPreload = analystPreload + `
def _kb_prime():
    import io
    d = pd.read_csv(io.StringIO("a,b\n1,2\n3,4\n")).describe()
    get_ipython().display_formatter.format(d)
_kb_prime()
del _kb_prime`

	analystWarm    = "warm"    // a warm pool, no preload
	analystImports = "imports" // a warm pool, analystPreload
	analystPrimed  = "primed"  // a warm pool, analystPrimedPreload
)

// analyst measures the analyst's first cell cold, warm, and warm with a preload.
func (r *runner) analyst(ctx context.Context) ([]Row, error) {
	csv, err := writeAnalystCSV(r.data)
	if err != nil {
		return nil, err
	}
	e, ws, err := r.newExecutor(ctx, 0,
		executor.Template{Name: analystWarm, Description: "warm pool, no preload", Warm: 1},
		executor.Template{Name: analystImports, Description: "warm pool, pandas and matplotlib imported", Warm: 1, Preload: analystPreload},
		executor.Template{Name: analystPrimed, Description: "warm pool, pandas and matplotlib imported and run once", Warm: 1, Preload: analystPrimedPreload})
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	defer e.Close()

	// The reference kernel runs the cell once, so that what it measures after is
	// the cell's own work.
	if a, err := r.ref.do("analyst", csv, "0"); err != nil {
		return nil, err
	} else if a.Bytes == 0 {
		return nil, fmt.Errorf("reference analyst: the cell printed nothing")
	}

	kinds := []struct{ template, label string }{
		{api.DefaultTemplateName, "cold, no warm pool"},
		{analystWarm, "warm, no preload"},
		{analystImports, "warm, preload: imports"},
		{analystPrimed, "warm, preload: primed"},
	}
	n := r.iters(1, 20)
	kb := make([][]float64, len(kinds))
	var ref []float64
	for i := 0; i < n; i++ {
		// The order turns each round, so that none always runs after the same one.
		for k := range kinds {
			j := (i + k) % len(kinds)
			d, err := r.analystCall(ctx, e, kinds[j].template, fmt.Sprintf("an-%s-%d", kinds[j].template, i), csv)
			if err != nil {
				return nil, err
			}
			kb[j] = append(kb[j], d)
		}
		a, err := r.ref.do("analyst", csv, "1")
		if err != nil {
			return nil, err
		}
		ref = append(ref, a.MS...)
	}
	var rows []Row
	for j, k := range kinds {
		row := Row{Name: r.backend + ": analyst 1st cell, " + k.label, N: n,
			KB50: percentile(kb[j], .5), KB99: percentile(kb[j], .99),
			Ref50: percentile(ref, .5), Ref99: percentile(ref, .99), RefLabel: "same cell over ZMQ, run before"}
		if k.template == analystImports || k.template == analystPrimed {
			row.Note = "goal p50 <= 100 ms"
		}
		rows = append(rows, row)
	}
	mem, err := r.warmMemory(ctx, e, []string{analystWarm, analystImports, analystPrimed})
	return append(rows, mem...), err
}

// analystCall runs the analyst's cell as the first call of a new session of
// template, once every warm pool is full, and closes the session.
func (r *runner) analystCall(ctx context.Context, e *executor.Executor, template, id, csv string) (float64, error) {
	if err := waitPools(ctx, e); err != nil {
		return 0, err
	}
	res, d, err := r.exec(ctx, e, api.Request{SessionID: id, Template: template, Code: analystCell, Inputs: []string{csv}})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", template, err)
	}
	if !strings.Contains(res.Result, "count") {
		return 0, fmt.Errorf("%s: df.describe() gave %q", template, res.Result)
	}
	if err := e.CloseSession(ctx, id); err != nil {
		return 0, err
	}
	return ms(d), nil
}

// memoryCell prints the kernel's RSS in KiB and its host name (a docker container's
// is its short id).
const memoryCell = `import socket
print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmRSS:')][0], socket.gethostname())`

// warmMemory reads the memory of warm kernels of each template as handed out (their
// first call reads it): n rounds, each taking one kernel of every pool once they are
// full. No call is timed, so the refills may run meanwhile.
func (r *runner) warmMemory(ctx context.Context, e *executor.Executor, templates []string) ([]Row, error) {
	n := r.iters(1, 3)
	rss := make([]float64, len(templates))
	box := make([]float64, len(templates))
	for i := 0; i < n; i++ {
		if err := waitPools(ctx, e); err != nil {
			return nil, err
		}
		for j, tmpl := range templates {
			id := fmt.Sprintf("mem-%s-%d", tmpl, i)
			res, _, err := r.exec(ctx, e, api.Request{SessionID: id, Template: tmpl, Code: memoryCell})
			if err != nil {
				return nil, err
			}
			f := strings.Fields(res.Stdout)
			if len(f) != 2 {
				return nil, fmt.Errorf("memory of a %s kernel: %q", tmpl, res.Stdout)
			}
			kib, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return nil, err
			}
			rss[j] += kib * 1024
			if r.spec.Containers {
				box[j] += containerMemory(f[1])
			}
			if err := e.CloseSession(ctx, id); err != nil {
				return nil, err
			}
		}
	}
	what := map[string]string{analystWarm: "no preload", analystImports: "preload: imports", analystPrimed: "preload: primed"}
	var rows []Row
	for j, tmpl := range templates {
		note := fmt.Sprintf("kernel RSS %.1f MB", mb(rss[j]/float64(n)))
		if r.spec.Containers {
			note += fmt.Sprintf("; container %.1f MB (docker stats)", mb(box[j]/float64(n)))
		}
		rows = append(rows, Row{Name: fmt.Sprintf("%s: memory per warm kernel, %s", r.backend, what[tmpl]), N: n, Note: note})
	}
	return rows, nil
}

// containerMemory is `docker stats` memory of container id (0 when unknown).
func containerMemory(id string) float64 {
	out, err := exec.Command("docker", "stats", "--no-stream", "--format", "{{.MemUsage}}", id).Output()
	if err != nil {
		return 0
	}
	used, _, _ := strings.Cut(strings.TrimSpace(string(out)), "/")
	return parseSize(strings.TrimSpace(used))
}

// waitPools waits until every warm pool of e is full: then no warm start runs.
func waitPools(ctx context.Context, e *executor.Executor) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		full := true
		for _, t := range e.Templates() {
			if e.WarmReadyOf(t.Name) < t.Warm {
				full = false
			}
		}
		if full {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the warm pools did not fill in 5 minutes")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// writeAnalystCSV writes the analyst's table, ImageNet classifiers as in the
// research demo, into dir as benchmarks.csv.
func writeAnalystCSV(dir string) (string, error) {
	var b strings.Builder
	b.WriteString("model,year,top1_accuracy,params_millions,gflops\n")
	for i := 0; i < 19; i++ {
		fmt.Fprintf(&b, "model-%02d,%d,%.2f,%.1f,%.2f\n", i, 2012+i/2, 56.5+float64(i)*1.4, 5.3+float64(i*i%140), 0.7+float64(i)*1.3)
	}
	path := filepath.Join(dir, "benchmarks.csv")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}
