package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// TestServeChaos is issue 46's restart-chaos test. On local and on docker (at
// once, each against its own serve and workspace) it runs rounds of: start
// `kernelbox serve` on the workspace; one call on every session (after an
// explicit resume for some hibernated ones); a few random operations (calls,
// hibernate, resume, fork, kernel kills: os.kill from the code, now or from a
// timer that lands around the call's checkpoint); then a kill point: something
// in flight (a restore loading a value whose __setstate__ sleeps, a checkpoint
// of a 80 MB array being written, a fork, a hibernate, a warm kernel being
// taken, a call) when serve gets SIGKILL, or SIGTERM with --on-stop keep,
// hibernate or close. Sessions ck* checkpoint after each call, pl* do not.
//
// Every call first checks the session (chaosCheckCode), and judgeValue applies
// the invariant to every value an ok call acknowledged: it is there, or its loss
// was told (state_lost, or state_restored naming the call the state is from and
// the names not restored); a file an ok call wrote is never emptied, changed or
// lost; a hibernated session stays hibernated across every kind of stop. Every
// breach is reported with its round and the seed.
//
// KERNELBOX_CHAOS_SEED replays a run (the log names its seed),
// KERNELBOX_CHAOS_ROUNDS runs that many rounds per backend, and
// KERNELBOX_CHAOS_DURATION (default 75s) bounds the rounds otherwise (at least
// chaosMinRounds run, so that every kind of stop comes once);
// KERNELBOX_CHAOS_POINTS (comma-separated names of chaosPoints) keeps to some
// kill points, and KERNELBOX_CHAOS_LOGDIR keeps every serve's log there.
func TestServeChaos(t *testing.T) {
	seed := chaosSeed(t)
	for i, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var args []string
			switch backend {
			case "local":
				py := testenv.Jupyter(t)
				testenv.Imports(t, py, "numpy", "dill")
				args = []string{"--backend", "local", "--python", py}
			case "docker":
				testenv.Image(t, "kernelbox/kernel:latest")
				args = []string{"--backend", "docker", "--memory", "1g"}
			}
			newChaosRun(t, backend, args, seed, uint64(i)).run()
		})
	}
}

// chaosMinRounds: a SIGTERM with each --on-stop policy and one SIGKILL.
const chaosMinRounds = 4

// chaosSeed is KERNELBOX_CHAOS_SEED, or the time.
func chaosSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("KERNELBOX_CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "KERNELBOX_CHAOS_SEED")
		seed = s
	}
	t.Logf("chaos seed %d (replay: KERNELBOX_CHAOS_SEED=%d go test -race -count=1 -run 'TestServeChaos/BACKEND' ./cmd/kernelbox/; "+
		"KERNELBOX_CHAOS_ROUNDS=N for N rounds, KERNELBOX_CHAOS_DURATION=10m to run longer)", seed, seed)
	return seed
}

// chaosLimits reads KERNELBOX_CHAOS_ROUNDS (0: unset) and KERNELBOX_CHAOS_DURATION.
func chaosLimits(t *testing.T) (rounds int, dur time.Duration) {
	dur = 75 * time.Second
	if v := os.Getenv("KERNELBOX_CHAOS_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "KERNELBOX_CHAOS_ROUNDS")
		rounds = n
	}
	if v := os.Getenv("KERNELBOX_CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "KERNELBOX_CHAOS_DURATION")
		dur = d
	}
	return rounds, dur
}

// chaosCounts are a run's counts, for its summary.
type chaosCounts struct {
	rounds                                  int
	values, kept, told, silent, misreported int
	files, intact, badFiles                 int
	hibKept, hibNotKept                     int
	liveAtHibStop, hibByStop                int // live sessions at a SIGTERM --on-stop hibernate, and those it hibernated
	stops, points, ops                      map[string]int
}

// chaosRun is one backend's run: its serve, its model and its counts. Owned by
// the test's goroutine; background operations only use c and report back.
type chaosRun struct {
	t       *testing.T
	backend string
	base    []string // serve's flags but --on-stop
	ws      string
	wsRoot  string
	seed    uint64
	rng     *rand.Rand
	order   []string // session ids in the order they were made
	ss      map[string]*chaosSession
	next    int // the last value number drawn
	ids     int // the last fork or new session number drawn
	round   int
	// pointOrder is the kill points' seeded order (chaos_points_test.go).
	pointOrder []string
	// lastStop describes the last stop and what was in flight; prevStop is it.
	lastStop string
	prevStop chaosStop

	t0     time.Time // the run's start
	serves int       // the serve processes stopped so far
	cmd    *exec.Cmd
	c      *client.Client
	log    *lockedBuffer
	owners []string // docker: every serve's owner label

	n          chaosCounts
	violations []string
}

func newChaosRun(t *testing.T, backend string, args []string, seed, stream uint64) *chaosRun {
	ws, data := testDirs(t)
	tmpl := filepath.Join(t.TempDir(), "templates.json")
	// --warm sizes only the default template's pool: ckpt asks for its own.
	require.NoError(t, os.WriteFile(tmpl, []byte(`{"templates": [{"name": "ckpt", "checkpoint": "after_call", "warm": 1}]}`), 0o600))
	r := &chaosRun{t: t, backend: backend, ws: ws, seed: seed, t0: time.Now(), rng: rand.New(rand.NewPCG(seed, stream)),
		ss: map[string]*chaosSession{}, lastStop: "none (first start)",
		n: chaosCounts{stops: map[string]int{}, points: map[string]int{}, ops: map[string]int{}}}
	r.base = append(args, "--workspace", ws, "--workdir", data, "--token", "tk", "--templates", tmpl,
		"--warm", "1", "--max-sessions", "16", "--log-level", "debug")
	if backend == "docker" {
		// Registered before any serve starts, so it runs after their cleanups
		// have killed them: what a failed run left is removed.
		t.Cleanup(func() { chaosReap(r.owners) })
	}
	for _, id := range []string{"ck1", "ck2", "pl1", "pl2"} {
		tmpl := ""
		if strings.HasPrefix(id, "ck") {
			tmpl = "ckpt"
		}
		r.add(newChaosSession(id, tmpl))
	}
	return r
}

// chaosReap removes the containers and networks of the given docker owners.
func chaosReap(owners []string) {
	for _, o := range owners {
		for _, kind := range []string{"ps -aq", "network ls -q"} {
			args := append(strings.Fields(kind), "--filter", "label=io.kernelbox.owner="+o)
			out, _ := exec.Command("docker", args...).Output()
			for _, id := range strings.Fields(string(out)) {
				rm := []string{"rm", "-f", id}
				if strings.HasPrefix(kind, "network") {
					rm = []string{"network", "rm", id}
				}
				_ = exec.Command("docker", rm...).Run()
			}
		}
	}
}

func (r *chaosRun) add(s *chaosSession) {
	r.ss[s.id] = s
	r.order = append(r.order, s.id)
}

func (r *chaosRun) remove(id string) {
	delete(r.ss, id)
	r.order = slicesDelete(r.order, id)
}

func slicesDelete(list []string, id string) []string {
	out := list[:0]
	for _, x := range list {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}

// logf logs with the backend and round.
func (r *chaosRun) logf(format string, args ...any) {
	r.t.Helper()
	r.t.Logf("chaos %s %s [%.1fs]: %s", r.backend, r.roundName(), time.Since(r.t0).Seconds(), fmt.Sprintf(format, args...))
}

// roundName is "round N", or "final start" after the rounds.
func (r *chaosRun) roundName() string {
	if r.round == 0 {
		return "final start"
	}
	return fmt.Sprintf("round %d", r.round)
}

// violate records a breach of the invariant.
func (r *chaosRun) violate(session, what string) {
	r.t.Helper()
	v := fmt.Sprintf("seed %d, %s %s (after %s): session %s: %s", r.seed, r.backend, r.roundName(), r.lastStop, session, what)
	r.violations = append(r.violations, v)
	r.t.Log("VIOLATION " + v)
}

// run runs the rounds, then a last start that checks everything and closes it.
func (r *chaosRun) run() {
	rounds, dur := chaosLimits(r.t)
	stops := r.schedule()
	start := time.Now()
	for r.round = 1; ; r.round++ {
		if rounds > 0 && r.round > rounds {
			break
		}
		if rounds == 0 && r.round > chaosMinRounds && time.Since(start) > dur {
			break
		}
		stop := chaosStop{sig: syscall.SIGKILL, onStop: []string{"keep", "hibernate", "close"}[r.rng.IntN(3)]}
		if r.round <= len(stops) {
			stop = stops[r.round-1]
		} else if r.rng.IntN(10) < 3 {
			stop.sig = syscall.SIGTERM
		}
		var took []string
		t0 := time.Now()
		for _, phase := range []struct {
			name string
			f    func()
		}{
			{"start", func() { r.startServe(stop.onStop) }},
			{"check", r.checkAll},
			{"workload", r.workload},
			{"park", r.park},
			{"kill point", func() { r.killPoint(stop) }},
		} {
			t1 := time.Now()
			phase.f()
			took = append(took, fmt.Sprintf("%s %s", phase.name, time.Since(t1).Round(time.Millisecond)))
		}
		r.n.rounds++
		r.logf("took %s (%s)", time.Since(t0).Round(time.Millisecond), strings.Join(took, ", "))
	}
	r.round = 0
	r.finish()
}

// chaosStop is a round's stop: the signal, and serve's --on-stop (what a SIGTERM
// does).
type chaosStop struct {
	sig    syscall.Signal
	onStop string
}

func (s chaosStop) String() string {
	if s.sig == syscall.SIGKILL {
		return "SIGKILL"
	}
	return "SIGTERM --on-stop " + s.onStop
}

// schedule is the first rounds' stops: one SIGTERM with each policy and one
// SIGKILL, in a seeded order.
func (r *chaosRun) schedule() []chaosStop {
	s := []chaosStop{{syscall.SIGTERM, "keep"}, {syscall.SIGTERM, "hibernate"}, {syscall.SIGTERM, "close"}, {syscall.SIGKILL, "keep"}}
	r.rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

// startServe starts serve on the workspace and checks that every session the
// model knows to be hibernated is listed hibernated.
func (r *chaosRun) startServe(onStop string) {
	r.cmd, r.c, r.log = nil, nil, nil
	cmd, url, log := rawServe(r.t, append(r.base, "--on-stop", onStop)...)
	r.cmd, r.log = cmd, log
	r.c = adoptClient(r.t, url)
	if r.backend == "docker" {
		r.owners = append(r.owners, ownerLabel(r.t, cmd.Process.Pid))
	}
	if r.wsRoot == "" {
		r.wsRoot = serveWorkspace(r.t, cmd.Process.Pid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := r.c.Sessions(ctx)
	require.NoError(r.t, err)
	state := map[string]api.SessionState{}
	for _, s := range list {
		state[s.ID] = s.State
	}
	for _, id := range r.order {
		s := r.ss[id]
		got, listed := state[id]
		if s.hibernated && !s.uncertain {
			if got == api.StateHibernated {
				r.n.hibKept++
			} else {
				r.n.hibNotKept++
				if !listed {
					got = "not listed"
				}
				r.violate(id, fmt.Sprintf("was hibernated before the stop and is %s after it", got))
			}
		}
		if !s.hibernated && !s.uncertain && r.prevStop == (chaosStop{syscall.SIGTERM, "hibernate"}) {
			r.n.liveAtHibStop++
			if got == api.StateHibernated {
				r.n.hibByStop++
			}
		}
		s.hibernated, s.uncertain = got == api.StateHibernated, false
	}
}

// checkAll runs one call on every session at once (after an explicit resume for
// about half the hibernated ones; a third of those are left hibernated): each
// checks all of its session's values.
func (r *chaosRun) checkAll() {
	type job struct {
		s      *chaosSession
		resume bool
		p      chaosPending
		rr     *api.ResumeResult
		rerr   error
		res    *api.Result
		call   int
		err    error
	}
	var jobs []*job
	for _, id := range r.order {
		s := r.ss[id]
		if s.hibernated && r.rng.IntN(3) == 0 {
			continue // stays hibernated across the next stop too
		}
		jobs = append(jobs, &job{s: s, resume: s.hibernated && r.rng.IntN(2) == 0, p: r.callCode(s, true, "")})
	}
	eachJob := make([]string, len(jobs))
	eachSession(eachJob, func(i int, _ string) {
		j := jobs[i]
		ctx, cancel := context.WithTimeout(context.Background(), chaosCallBound)
		defer cancel()
		if j.resume {
			j.rr, j.rerr = r.c.Resume(ctx, j.s.id)
		}
		j.res, j.call, j.err = runCall(ctx, r.c, j.s.id, j.s.template, j.p.code)
	})
	for _, j := range jobs {
		if j.resume {
			r.absorbResume(j.s, j.rr, j.rerr)
		}
		r.absorb(j.s, "check", j.p, j.res, j.call, j.err)
	}
}

// park hibernates a session (one time in two), so that a hibernated session
// is there at most stops.
func (r *chaosRun) park() {
	if r.rng.IntN(2) == 0 {
		if s := r.pick("*", true); s != nil && !s.hibernated {
			r.opHibernate(s)
		}
	}
}

// chaosCallBound bounds one operation: a cold docker start under a loaded 2-core
// machine took over 60 s (TestServeDockerAdopt).
const chaosCallBound = 3 * time.Minute

// finish starts serve once more, checks every session, closes them all, stops
// serve with --on-stop close and checks that nothing of it is left; then it
// prints the summary and fails the test on any breach.
func (r *chaosRun) finish() {
	r.startServe("close")
	r.checkAll()
	ctx, cancel := context.WithTimeout(context.Background(), chaosCallBound)
	defer cancel()
	for _, id := range r.order {
		// Not found: a session whose every call failed (a kernel start past its
		// bound on a loaded machine) was never made.
		if err := r.c.CloseSession(ctx, id); err != nil && !errors.Is(err, api.ErrNotFound) {
			r.violate(id, "the final close failed: "+err.Error())
		}
	}
	pid := r.cmd.Process.Pid
	r.signal(chaosStop{sig: syscall.SIGTERM, onStop: "close"}, "nothing (the final stop)")
	owners := r.owners
	if r.backend == "local" {
		owners = []string{""}
	}
	for _, o := range owners {
		var left soakLeft
		for t0 := time.Now(); time.Since(t0) < 30*time.Second; time.Sleep(500 * time.Millisecond) {
			if left = soakCount(r.t, r.backend, pid, o, r.wsRoot); left == (soakLeft{}) {
				break
			}
		}
		if left != (soakLeft{}) {
			r.violate("-", fmt.Sprintf("left 30 s after every session was closed and serve stopped (owner %q): %+v; loop devices: %v",
				o, left, chaosLoops(r.wsRoot)))
		}
	}
	r.leftDirs()
	r.summary()
}

// leftDirs checks the workspace's sessions directory once every session is
// closed and serve stopped: a warm kernel's directory left by a SIGKILLed serve
// (.warm-*, issue 46 item 11) is a breach; anything else is logged.
func (r *chaosRun) leftDirs() {
	entries, err := os.ReadDir(filepath.Join(r.ws, "sessions"))
	if err != nil {
		r.logf("the sessions directory: %v", err)
		return
	}
	var names, warm []string
	for _, e := range entries {
		names = append(names, e.Name())
		if strings.HasPrefix(e.Name(), ".warm-") {
			warm = append(warm, e.Name())
		}
	}
	r.logf("left in WORKSPACE/sessions after the final close: %v", names)
	if len(warm) > 0 {
		r.violate("-", fmt.Sprintf("%d warm kernel directories left after every session was closed and serve stopped: %v", len(warm), warm))
	}
}

// chaosLoops lists the loop devices bound to files under root, and their files.
func chaosLoops(root string) []string {
	var out []string
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, p := range loops {
		b, _ := os.ReadFile(p)
		if f := strings.TrimSpace(string(b)); strings.HasPrefix(f, root+"/") {
			out = append(out, filepath.Base(filepath.Dir(filepath.Dir(p)))+" -> "+f)
		}
	}
	return out
}

// summary logs the run's counts and one line for the closing note, and fails
// the test on any breach.
func (r *chaosRun) summary() {
	n := r.n
	line := fmt.Sprintf("chaos %s seed %d: %d rounds, stops %s; kill points %s; values checked %d: kept %d, told lost %d, silently lost %d, misreported %d; "+
		"files checked %d: intact %d, emptied/changed/lost %d; hibernated sessions kept hibernated %d of %d; live sessions hibernated by a SIGTERM --on-stop hibernate %d of %d; %d violations",
		r.backend, r.seed, n.rounds, chaosMap(n.stops), chaosMap(n.points), n.values, n.kept, n.told, n.silent, n.misreported,
		n.files, n.intact, n.badFiles, n.hibKept, n.hibKept+n.hibNotKept, n.hibByStop, n.liveAtHibStop, len(r.violations))
	r.t.Logf("chaos %s operations: %s", r.backend, chaosMap(n.ops))
	r.t.Log("SUMMARY " + line)
	if len(r.violations) > 0 {
		r.t.Errorf("%d breaches of the invariant (seed %d; replay with KERNELBOX_CHAOS_SEED=%d):\n%s",
			len(r.violations), r.seed, r.seed, strings.Join(r.violations, "\n"))
	}
}

// chaosMap formats counts as "a 2, b 1", sorted by name.
func chaosMap(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
