package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/procs"
)

// density measures the executor's own memory (RSS of this process) with 1, 10 and 50
// idle sessions, and the memory each session's kernel (or container) takes.
func (r *runner) density(ctx context.Context) ([]Row, error) {
	e, ws, err := r.newExecutor(ctx, 0)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	defer e.Close()
	steps := []int{1, 10, 50}
	if r.c.Short {
		steps = []int{1, 3}
	}
	var rows []Row
	have := 0
	for _, n := range steps {
		if err := openSessions(ctx, e, have, n); err != nil {
			return rows, err
		}
		have = n
		runtime.GC()
		debug.FreeOSMemory()
		self := procs.RSS(os.Getpid())
		per, how := r.perSession(n)
		rows = append(rows, Row{
			Name: fmt.Sprintf("%s: memory with %d idle sessions", r.backend, n), N: n,
			Note: fmt.Sprintf("executor RSS %.1f MB; per session %.1f MB (%s)", mb(self), mb(per), how),
		})
	}
	return rows, nil
}

// openSessions starts sessions from..to-1, a few at a time.
func openSessions(ctx context.Context, e *executor.Executor, from, to int) error {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 3)
	errc := make(chan error, to-from)
	for i := from; i < to; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, err := e.Execute(ctx, api.Request{SessionID: "d" + strconv.Itoa(i), Code: "import pandas as pd\nx = 1"})
			if err == nil && res.Status != api.StatusOK {
				err = fmt.Errorf("session %d: %s", i, res.Status)
			}
			if err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// perSession returns the average memory of one session's kernel and how it was read.
func (r *runner) perSession(n int) (float64, string) {
	if r.spec.Containers {
		return dockerMemory(n)
	}
	var total float64
	count := 0
	for _, pid := range procs.Descendants(os.Getpid()) {
		if strings.Contains(procs.Cmdline(pid), "kernelapp") {
			total += procs.RSS(pid)
			count++
		}
	}
	if count == 0 {
		return 0, "no kernel processes found"
	}
	return total / float64(count), fmt.Sprintf("RSS of %d kernel processes, pandas imported", count)
}

// dockerMemory averages `docker stats` memory of kernelbox containers.
func dockerMemory(n int) (float64, string) {
	ids, err := exec.Command("docker", "ps", "-q", "--filter", "label=io.kernelbox.created-by=kernelbox").Output()
	if err != nil {
		return 0, "docker ps failed"
	}
	list := strings.Fields(string(ids))
	if len(list) == 0 {
		return 0, "no containers"
	}
	out, err := exec.Command("docker", append([]string{"stats", "--no-stream", "--format", "{{.MemUsage}}"}, list...)...).Output()
	if err != nil {
		return 0, "docker stats failed"
	}
	var total float64
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, l := range lines {
		used, _, _ := strings.Cut(l, "/")
		total += parseSize(strings.TrimSpace(used))
	}
	return total / float64(len(lines)), fmt.Sprintf("docker stats of %d containers, pandas imported", len(lines))
}

func parseSize(s string) float64 {
	units := []struct {
		suffix string
		mult   float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f * u.mult
		}
	}
	return 0
}

func mb(b float64) float64 { return b / (1 << 20) }
