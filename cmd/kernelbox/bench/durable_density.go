package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// The shape of the density measurement: at most densityLive kernels at once (the
// sessions' and the warm pool's), and a sample of hibernated sessions resumed.
const (
	densityLive   = 20
	densityWarm   = 2
	densitySample = 10
)

// holder opens sessions one after another, each with x = its index, and
// hibernates the oldest live ones in the background so that at most
// densityLive-densityWarm sessions are live at any moment. Safe for concurrent
// use by its own hibernation goroutines.
type holder struct {
	e     *executor.Executor
	slots chan struct{} // one per live session
	keep  int           // live sessions left when a hibernation is started

	mu    sync.Mutex
	live  []int // live sessions, oldest first
	hibMS []float64
	err   error
	wg    sync.WaitGroup
}

func densityID(i int) string { return fmt.Sprintf("h%04d", i) }

// open starts session i with x = i and returns how long its first call took.
func (h *holder) open(ctx context.Context, i int) (time.Duration, error) {
	select {
	case h.slots <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	t0 := time.Now()
	res, err := h.e.Execute(ctx, api.Request{SessionID: densityID(i), Code: "x = " + strconv.Itoa(i)})
	d := time.Since(t0)
	if err == nil && res.Status != api.StatusOK {
		err = fmt.Errorf("status %s: %+v", res.Status, res.Error)
	}
	if err != nil {
		return d, fmt.Errorf("open session %d: %w", i, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live = append(h.live, i)
	if len(h.live) > h.keep {
		old := h.live[0]
		h.live = h.live[1:]
		h.wg.Go(func() { h.hibernate(ctx, old) })
	}
	return d, h.err
}

// hibernate hibernates session i and frees its slot.
func (h *holder) hibernate(ctx context.Context, i int) {
	t0 := time.Now()
	_, err := h.e.Hibernate(ctx, densityID(i))
	d := time.Since(t0)
	<-h.slots
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hibMS = append(h.hibMS, ms(d))
	if err != nil && h.err == nil {
		h.err = fmt.Errorf("hibernate session %d: %w", i, err)
	}
}

// resumeSample resumes hibernated sessions spread over ids (each by a call of x,
// which must answer its own index), hibernating the oldest live session before
// each so that the live count stays as it was. It returns each resume's time.
func (h *holder) resumeSample(ctx context.Context, hibernated []int) ([]float64, error) {
	var out []float64
	for _, i := range sample(hibernated, densitySample) {
		h.mu.Lock()
		old := h.live[0]
		h.live = h.live[1:]
		h.mu.Unlock()
		if _, err := h.e.Hibernate(ctx, densityID(old)); err != nil {
			return out, fmt.Errorf("hibernate session %d: %w", old, err)
		}
		t0 := time.Now()
		res, err := h.e.Execute(ctx, api.Request{SessionID: densityID(i), Code: "x"})
		d := time.Since(t0)
		if err != nil {
			return out, fmt.Errorf("resume session %d: %w", i, err)
		}
		if res.Result != strconv.Itoa(i) || res.StateRestored == nil {
			return out, fmt.Errorf("resume session %d: x is %q (restored: %v, notes %v)", i, res.Result, res.StateRestored != nil, res.Notes)
		}
		out = append(out, ms(d))
		h.mu.Lock()
		h.live = append(h.live, i)
		h.mu.Unlock()
	}
	return out, nil
}

// sample returns at most n elements of v, spread evenly from its first.
func sample(v []int, n int) []int {
	if len(v) <= n {
		return v
	}
	out := make([]int, 0, n)
	for k := 0; k < n; k++ {
		out = append(out, v[k*len(v)/n])
	}
	return out
}

// durableDensity holds DurableSessions sessions open with at most 20 live kernels,
// the rest hibernated, then resumes a sample of the hibernated ones. It runs on
// local only: docker's row says so.
func (r *runner) durableDensity(ctx context.Context) ([]Row, error) {
	n := r.c.DurableSessions
	if n <= 0 {
		n = r.iters(30, 500)
	}
	title := fmt.Sprintf("%s: %d sessions open, <= %d live kernels", r.backend, n, densityLive)
	if r.spec.Containers {
		return []Row{{Name: title, Note: "NOT MEASURED: the density part runs on the local backend only (a docker run of it takes too long for one benchmark)"}}, nil
	}
	memBefore, memErr := memUsed()
	e, ws, err := r.newExecutorWith(ctx, func(o *executor.Options) { o.MaxSessions, o.Warm = densityLive, densityWarm })
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	defer e.Close()
	h := &holder{e: e, slots: make(chan struct{}, densityLive-densityWarm), keep: densityLive - densityWarm - 2}
	var openMS []float64
	t0 := time.Now()
	for i := 0; i < n; i++ {
		d, err := h.open(ctx, i)
		if err != nil {
			h.wg.Wait()
			return []Row{{Name: title, Note: fmt.Sprintf("NOT MEASURED past %d sessions: %s", i, clipNote(err.Error()))}}, err
		}
		openMS = append(openMS, ms(d))
	}
	h.wg.Wait()
	took := time.Since(t0)
	if h.err != nil {
		return []Row{{Name: title, Note: "NOT MEASURED: " + clipNote(h.err.Error())}}, h.err
	}
	memAfter, memErr2 := memUsed()
	held := countSessions(e.Sessions())
	dirBytes := diskUsed(ws.Root())
	mem := "host memory not read: " + fmt.Sprint(memErr, memErr2)
	if memErr == nil && memErr2 == nil {
		mem = fmt.Sprintf("host memory used %+.0f MB (%.0f -> %.0f MB, /proc/meminfo, shared machine)", (memAfter-memBefore)/1e6, memBefore/1e6, memAfter/1e6)
	}
	rows := []Row{{Name: title, N: n, KB50: percentile(openMS, .5), KB99: percentile(openMS, .99),
		Note: fmt.Sprintf("times: each session's first call; open %d: %d live + %d warm kernels, %d hibernated; took %.0f s (hibernate p50 %.0f ms); %s; snapshots %.1f MB (%.1f kB each), workspace %.1f MB on disk; goal >= 500 open with <= 20 live; no reference",
			held.open, held.live, densityWarm, held.hibernated, took.Seconds(), percentile(h.hibMS, .5), mem,
			float64(held.snapBytes)/1e6, float64(held.snapBytes)/1e3/float64(max(held.hibernated, 1)), float64(dirBytes)/1e6)}}
	resumed, err := h.resumeSample(ctx, held.hibernatedIdx)
	sampleTitle := fmt.Sprintf("%s: resume a hibernated session (x = i), sample of %d", r.backend, len(resumed))
	if err != nil {
		return append(rows, Row{Name: sampleTitle, Note: "FAILED: " + clipNote(err.Error())}), err
	}
	return append(rows, Row{Name: sampleTitle, N: len(resumed), KB50: percentile(resumed, .5), KB99: percentile(resumed, .99),
		Note: fmt.Sprintf("each answered its own x, among %d open; no same-run reference: E2B publishes ~%.0f s to resume", held.open, e2bResumeSec)}), nil
}

// heldSessions counts an executor's sessions by state.
type heldSessions struct {
	open, live, hibernated int
	snapBytes              int64
	hibernatedIdx          []int // the density sessions' indexes, in id order
}

func countSessions(list []api.SessionInfo) heldSessions {
	var h heldSessions
	for _, s := range list {
		h.open++
		if s.State != api.StateHibernated {
			h.live++
			continue
		}
		h.hibernated++
		if s.Snapshot != nil {
			h.snapBytes += s.Snapshot.Bytes
		}
		if i, err := strconv.Atoi(strings.TrimPrefix(s.ID, "h")); err == nil {
			h.hibernatedIdx = append(h.hibernatedIdx, i)
		}
	}
	return h
}

// diskUsed is the space the files under root take on disk (allocated blocks).
func diskUsed(root string) int64 {
	var total int64
	_ = filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			}
		}
		return nil
	})
	return total
}

// memUsed is the host's memory in use, MemTotal - MemAvailable, in bytes.
func memUsed() (float64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseMeminfo(f)
}

// parseMeminfo reads MemTotal - MemAvailable, in bytes, from /proc/meminfo's text.
func parseMeminfo(r io.Reader) (float64, error) {
	var total, avail float64
	seen := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || (f[0] != "MemTotal:" && f[0] != "MemAvailable:") {
			continue
		}
		kb, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return 0, fmt.Errorf("meminfo: %s: %w", f[0], err)
		}
		if f[0] == "MemTotal:" {
			total = kb * 1024
		} else {
			avail = kb * 1024
		}
		seen++
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if seen != 2 {
		return 0, fmt.Errorf("meminfo: no MemTotal and MemAvailable")
	}
	return total - avail, nil
}
