package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
)

// The restart-chaos test's kill points (chaos_test.go): what is in flight when
// serve is stopped, and the stop itself.

// chaosPoints are the kill points, taken in a seeded order, one per round.
var chaosPoints = []string{
	"restore:resume",     // an explicit resume loading m_slow
	"restore:call",       // a call waking a hibernated session, loading m_slow
	"restore:checkpoint", // a call after a kernel kill, loading the checkpoint with m_slow
	"restore:fork",       // a fork's new session loading m_slow
	"checkpoint",         // the checkpoint of a 80 MB array after an ok call
	"fork",               // a fork of a session with a 80 MB array
	"hibernate",          // a hibernate of a session with a 80 MB array
	"warm",               // a new session's first call taking a warm kernel
	"call",               // a call in its code
	"idle",               // nothing
}

// chaosPointList is chaosPoints, or the ones KERNELBOX_CHAOS_POINTS names
// (comma-separated), to replay one kind.
func chaosPointList(t *testing.T) []string {
	v := os.Getenv("KERNELBOX_CHAOS_POINTS")
	if v == "" {
		return slices.Clone(chaosPoints)
	}
	list := strings.Split(v, ",")
	for _, p := range list {
		require.Contains(t, chaosPoints, p, "KERNELBOX_CHAOS_POINTS")
	}
	return list
}

// chaosSlowSecs is how long m_slow's restore sleeps.
const chaosSlowSecs = 2.5

// killPoint runs the round's kill point: it sets something running, waits for
// the moment drawn, stops serve with stop, and takes what the operations in
// flight answered into the model.
func (r *chaosRun) killPoint(stop chaosStop) {
	if len(r.pointOrder) == 0 {
		r.pointOrder = chaosPointList(r.t)
		r.rng.Shuffle(len(r.pointOrder), func(i, j int) { r.pointOrder[i], r.pointOrder[j] = r.pointOrder[j], r.pointOrder[i] })
	}
	kind := r.pointOrder[(r.round-1)%len(r.pointOrder)]
	var (
		bgs  []*chaosBg
		desc string
	)
	switch {
	case strings.HasPrefix(kind, "restore:"):
		bgs, desc = r.pointRestore(strings.TrimPrefix(kind, "restore:"))
	case kind == "checkpoint":
		desc = r.pointCheckpoint()
	case kind == "fork" || kind == "hibernate":
		bgs, desc = r.pointBig(kind)
	case kind == "warm":
		bgs, desc = r.pointWarm()
	case kind == "call":
		s := r.pick("*", true)
		bgs = []*chaosBg{r.bgCall(s, "call", r.callCode(s, true, "import time\ntime.sleep(30)"))}
		d := r.sleep(0.3, 2)
		desc = fmt.Sprintf("a call of %s, %s in", s.id, d)
	default:
		desc = "nothing"
		r.sleep(0, 0.5)
	}
	r.n.points[kind]++
	r.signal(stop, desc)
	r.waitBg(bgs)
}

// sleep sleeps a drawn time between lo and hi seconds and returns it.
func (r *chaosRun) sleep(lo, hi float64) time.Duration {
	d := time.Duration((lo + (hi-lo)*r.rng.Float64()) * float64(time.Second))
	time.Sleep(d)
	return d.Round(time.Millisecond)
}

// sessionDir is a session's directory on the host.
func (r *chaosRun) sessionDir(id string) string { return filepath.Join(r.ws, "sessions", id) }

// pointRestore arms a session with m_slow, then leaves a restore of it running
// (variant resume, call, checkpoint or fork) and waits until m_slow's
// __setstate__ has begun, plus a drawn part of its sleep.
func (r *chaosRun) pointRestore(variant string) ([]*chaosBg, string) {
	tmpl := "*"
	if variant == "checkpoint" {
		tmpl = "ckpt"
	}
	s := r.pick(tmpl, false)
	if s == nil {
		return nil, "nothing (no session to arm)"
	}
	marker := fmt.Sprintf("kbc_arm_%d", r.next+1)
	if !r.opCall(s, "arm m_slow", chaosSlowCode(chaosSlowSecs, marker)) {
		return nil, "nothing (arming " + s.id + " failed)"
	}
	target := s.id
	var bg *chaosBg
	switch variant {
	case "resume", "call":
		if !r.opHibernate(s) {
			return nil, "nothing (hibernating " + s.id + " failed)"
		}
		if variant == "resume" {
			bg = r.bgResume(s)
		} else {
			bg = r.bgCall(s, "call waking", r.callCode(s, true, ""))
		}
	case "checkpoint":
		r.opCall(s, "kernel kill", "import os\nos.kill(os.getpid(), 9)")
		bg = r.bgCall(s, "call restoring", r.callCode(s, true, ""))
	case "fork":
		target = r.newID("fk", s.id)
		bg = r.bgFork(s, target)
	}
	took, seen := waitFile(filepath.Join(r.sessionDir(target), marker), chaosCallBound)
	if !seen {
		return []*chaosBg{bg}, fmt.Sprintf("the %s of %s (m_slow's restore never began in %s)", variant, target, took)
	}
	d := r.sleep(0, chaosSlowSecs-0.3)
	return []*chaosBg{bg}, fmt.Sprintf("the restore (%s) of %s, %s into m_slow's %gs __setstate__ (%s after the request)",
		variant, target, d, chaosSlowSecs, took)
}

// waitFile waits for a file to exist (and hold a byte when nonEmpty), bounded.
func waitFile(path string, bound time.Duration) (time.Duration, bool) {
	t0 := time.Now()
	for time.Since(t0) < bound {
		if _, err := os.Stat(path); err == nil {
			return time.Since(t0).Round(time.Millisecond), true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return bound, false
}

// pointCheckpoint makes a ckpt session's call set a 80 MB array and a value;
// serve is stopped right after the ok, or once the checkpoint's temporary file
// has data, plus a drawn moment.
func (r *chaosRun) pointCheckpoint() string {
	s := r.pick("ckpt", true)
	if !r.opCall(s, "call with big", chaosBigCode) {
		return "nothing (the call with big failed on " + s.id + ")"
	}
	if r.rng.IntN(2) == 0 {
		d := r.sleep(0, 0.05)
		return fmt.Sprintf("the checkpoint of %s after its call %d (80 MB), %s after the ok%s", s.id, r.lastCall(s), d, r.ckptTemp(s))
	}
	t0 := time.Now()
	for time.Since(t0) < time.Minute && r.ckptTemp(s) == "" {
		time.Sleep(5 * time.Millisecond)
	}
	d := r.sleep(0, 0.3)
	return fmt.Sprintf("the checkpoint of %s after its call %d (80 MB), %s after its temporary file appeared%s", s.id, r.lastCall(s), d, r.ckptTemp(s))
}

// lastCall is the call number of s's newest value.
func (r *chaosRun) lastCall(s *chaosSession) int {
	n := 0
	for _, v := range s.values {
		n = max(n, v.call)
	}
	return n
}

// ckptTemp describes the checkpoint's temporary file of s, "" when there is none.
func (r *chaosRun) ckptTemp(s *chaosSession) string {
	m, _ := filepath.Glob(filepath.Join(r.sessionDir(s.id), ".kernelbox-checkpoint.tmp-*"))
	for _, p := range m {
		if fi, err := os.Stat(p); err == nil && fi.Size() > 0 {
			return fmt.Sprintf(" (temporary file: %d MB written)", fi.Size()>>20)
		}
	}
	return ""
}

// pointBig leaves a fork or a hibernate of a session with a 80 MB array
// running, and waits a drawn moment.
func (r *chaosRun) pointBig(kind string) ([]*chaosBg, string) {
	s := r.pick("*", false)
	if s == nil || !r.opCall(s, "call with big", chaosBigCode) {
		return nil, "nothing (no session for a " + kind + ")"
	}
	var bg *chaosBg
	what := s.id
	if kind == "fork" {
		id := r.newID("fk", s.id)
		bg = r.bgFork(s, id)
		what += " into " + id
	} else {
		bg = r.bgHibernate(s)
	}
	d := r.sleep(0.05, 2)
	return []*chaosBg{bg}, fmt.Sprintf("a %s of %s (80 MB), %s in", kind, what, d)
}

// pointWarm waits for a template's warm kernel and leaves a new session's first
// call, which takes it, running.
func (r *chaosRun) pointWarm() ([]*chaosBg, string) {
	tmpl := []string{"", "ckpt"}[r.rng.IntN(2)]
	name := tmpl
	if name == "" {
		name = "default"
	}
	t0 := time.Now()
	ready := false
	for !ready && time.Since(t0) < chaosCallBound {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ts, err := r.c.Templates(ctx)
		cancel()
		for _, t := range ts {
			ready = ready || (err == nil && t.Name == name && t.WarmReady > 0)
		}
		if !ready {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !ready {
		r.violate("-", fmt.Sprintf("template %s's warm pool (--warm 1) had no kernel ready for %s", name, time.Since(t0).Round(time.Second)))
	}
	s := newChaosSession(r.newID("nw", ""), tmpl)
	s.uncertain = true
	r.add(s)
	bg := r.bgCall(s, "first call", r.callCode(s, true, ""))
	d := r.sleep(0, 0.5)
	return []*chaosBg{bg}, fmt.Sprintf("the first call of %s taking template %s's warm kernel (ready: %t), %s in", s.id, name, ready, d)
}

// signal stops serve with stop and waits for it to exit, bounded: a SIGTERM
// that hibernates every session may take a while on a loaded machine.
func (r *chaosRun) signal(stop chaosStop, inflight string) {
	final := r.round == 0
	if !final {
		r.n.stops[stop.String()]++
		r.lastStop = fmt.Sprintf("%s in round %d with %s in flight", stop, r.round, inflight)
		r.prevStop = stop
	}
	r.logf("stop: %s with %s in flight", stop, inflight)
	t0 := time.Now()
	exited := make(chan error, 1)
	go func() { exited <- r.cmd.Wait() }()
	require.NoError(r.t, r.cmd.Process.Signal(stop.sig))
	bound := 30 * time.Second
	if stop.sig == syscall.SIGTERM {
		bound = 3 * time.Minute
	}
	select {
	case err := <-exited:
		if stop.sig == syscall.SIGTERM && err != nil {
			r.violate("-", fmt.Sprintf("serve exited with %v after %s; its log ends:\n%s", err, stop, chaosTail(r.log.String(), 30)))
		}
		r.logf("serve exited %s after the %s", time.Since(t0).Round(time.Millisecond), stop)
		r.keepLog()
	case <-time.After(bound):
		r.violate("-", fmt.Sprintf("serve did not exit within %s of a %s; its log ends:\n%s", bound, stop, chaosTail(r.log.String(), 30)))
		_ = r.cmd.Process.Kill()
		<-exited
	}
}

// keepLog writes the stopped serve's log into KERNELBOX_CHAOS_LOGDIR, when set
// (debug level: what each session did), for reading a breach.
func (r *chaosRun) keepLog() {
	dir := os.Getenv("KERNELBOX_CHAOS_LOGDIR")
	if dir == "" {
		return
	}
	r.serves++
	p := filepath.Join(dir, fmt.Sprintf("chaos-%d-%s-serve%02d.log", r.seed, r.backend, r.serves))
	if err := os.WriteFile(p, []byte(r.log.String()), 0o644); err != nil {
		r.logf("keeping serve's log: %v", err)
	}
}

// chaosTail is the last n lines of a log.
func chaosTail(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// chaosBg is an operation left running for a kill point.
type chaosBg struct {
	done  chan struct{}
	after func() // takes its answer into the model, on the test's goroutine, once done
}

// goBg runs op off the test's goroutine, bounded by chaosCallBound.
func goBg(op func(ctx context.Context)) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), chaosCallBound)
		defer cancel()
		op(ctx)
	}()
	return done
}

// bgCall leaves a call on s running.
func (r *chaosRun) bgCall(s *chaosSession, op string, p chaosPending) *chaosBg {
	var (
		res  *api.Result
		call int
		err  error
	)
	c, id, tmpl := r.c, s.id, s.template
	done := goBg(func(ctx context.Context) { res, call, err = runCall(ctx, c, id, tmpl, p.code) })
	return &chaosBg{done: done, after: func() {
		if err != nil {
			s.uncertain = true
			r.count(s.id, op+" (in flight at the stop)", soakErr(err))
			return
		}
		r.absorb(s, op+" (answered before the stop)", p, res, call, nil)
	}}
}

// bgResume leaves a resume of s running.
func (r *chaosRun) bgResume(s *chaosSession) *chaosBg {
	var (
		rr  *api.ResumeResult
		err error
	)
	c, id := r.c, s.id
	done := goBg(func(ctx context.Context) { rr, err = c.Resume(ctx, id) })
	return &chaosBg{done: done, after: func() {
		if err != nil {
			s.uncertain = true
			r.count(s.id, "resume (in flight at the stop)", soakErr(err))
			return
		}
		r.absorbResume(s, rr, nil)
	}}
}

// bgFork leaves a fork of s into id running.
func (r *chaosRun) bgFork(s *chaosSession, id string) *chaosBg {
	var (
		rr  *api.ResumeResult
		err error
	)
	c, src := r.c, s.id
	done := goBg(func(ctx context.Context) { rr, err = c.Fork(ctx, src, id) })
	return &chaosBg{done: done, after: func() { r.forked(s, id, rr, err, "fork (in flight at the stop)") }}
}

// bgHibernate leaves a hibernate of s running.
func (r *chaosRun) bgHibernate(s *chaosSession) *chaosBg {
	var (
		info *api.SessionInfo
		err  error
	)
	c, id := r.c, s.id
	done := goBg(func(ctx context.Context) { info, err = c.Hibernate(ctx, id) })
	return &chaosBg{done: done, after: func() {
		r.count(s.id, "hibernate (in flight at the stop)", soakErr(err))
		if err != nil {
			s.uncertain = true
			return
		}
		s.hibernated = info.State == api.StateHibernated
	}}
}

// waitBg waits for the operations left running, now that serve is gone.
func (r *chaosRun) waitBg(bgs []*chaosBg) {
	for _, b := range bgs {
		select {
		case <-b.done:
			b.after()
		case <-time.After(chaosCallBound + 30*time.Second):
			r.violate("-", "an operation in flight at the stop never ended")
		}
	}
}
