package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/client"
)

// The restart-chaos test's workload (chaos_test.go): calls that check and set,
// hibernate, resume, fork and kernel kills, each absorbed into the model.

// chaosMaxSessions bounds the sessions of a run: past it a fork or a new
// session first closes one the run made.
const chaosMaxSessions = 6

// chaosPending is a call's code and the value and file it sets (v nil: none).
type chaosPending struct {
	code    string
	v       *chaosValue
	file    string
	content string
}

// callCode builds a call on s: the check, the removal of the big values a kill
// point may have left (big, m_slow, Slow), then with set a new value v_<n> and a
// file f_<n>.txt written in a with-block (so that f stays bound to the closed
// file, as in most notebooks; by an absolute path one time in three), then
// extra.
func (r *chaosRun) callCode(s *chaosSession, set bool, extra string) chaosPending {
	var p chaosPending
	var b strings.Builder
	b.WriteString(chaosCheckCode(s))
	b.WriteString("for _kbc in ('big', 'm_slow', 'Slow'):\n    globals().pop(_kbc, None)\ndel _kbc\n")
	if set {
		r.next++
		n := r.next
		p.v = &chaosValue{name: fmt.Sprintf("v_%d", n), val: n}
		p.file = fmt.Sprintf("f_%d.txt", n)
		p.content = fmt.Sprintf("value %d of %s\n", n, s.id)
		path := fmt.Sprintf("%q", p.file)
		if r.rng.IntN(3) == 0 {
			path = fmt.Sprintf("__import__('os').path.abspath(%q)", p.file)
		}
		fmt.Fprintf(&b, "%s = %d\nwith open(%s, 'w') as f:\n    f.write(%q)\n", p.v.name, n, path, p.content)
	}
	if extra != "" {
		b.WriteString(extra + "\n")
	}
	p.code = b.String()
	return p
}

// chaosSlowCode makes m_slow, whose restore writes marker in the kernel's
// working directory (the session's) and then sleeps secs: a restore that is
// still loading when serve is stopped. Names load in sorted order, so the v_*
// values come after it.
func chaosSlowCode(secs float64, marker string) string {
	return fmt.Sprintf(`class Slow:
    def __init__(self, d, marker):
        self.d, self.marker = d, marker
    def __setstate__(self, st):
        import time
        open(st["marker"], "w").close()
        time.sleep(st["d"])
        self.__dict__.update(st)
m_slow = Slow(%g, %q)`, secs, marker)
}

// chaosBigCode makes an 80 MB array: a checkpoint, hibernate or fork of it
// takes a second or so.
const chaosBigCode = "import numpy\nbig = numpy.ones(10 << 20)"

// runCall runs code on a session and returns its result and the session's call
// number for it (api.SessionInfo.Calls after it, or one more than before it
// when serve is gone by then). Safe to run off the test's goroutine.
func runCall(ctx context.Context, c *client.Client, id, template, code string) (*api.Result, int, error) {
	before := callsOf(ctx, c, id)
	res, err := c.Execute(ctx, api.Request{SessionID: id, Template: template, Code: code})
	if err != nil {
		return nil, 0, err
	}
	call := callsOf(ctx, c, id)
	if call <= 0 && before >= 0 {
		call = before + 1
	}
	return res, call, nil
}

// callsOf is the session's call count (0 when it is not listed, -1 on an error).
func callsOf(ctx context.Context, c *client.Client, id string) int {
	list, err := c.Sessions(ctx)
	if err != nil {
		return -1
	}
	for _, s := range list {
		if s.ID == id {
			return s.Calls
		}
	}
	return 0
}

// outcome names an answer for the counts.
func outcome(res *api.Result, err error) string {
	if err != nil {
		return soakErr(err)
	}
	o := string(res.Status)
	if res.StateLost {
		o += "+state_lost"
	}
	if res.StateRestored != nil {
		o += "+restored:" + strings.SplitN(res.StateRestored.From, ":", 2)[0]
	}
	return o
}

// count counts an operation's outcome and logs it, for the trail a failure is
// read from.
func (r *chaosRun) count(session, op, outcome string) {
	r.n.ops[op+": "+outcome]++
	r.logf("%s %s: %s", op, session, outcome)
}

// opErr records an operation's error; an internal error (500) is a breach.
func (r *chaosRun) opErr(session, op string, err error) {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.StatusCode == 500 {
		r.violate(session, fmt.Sprintf("%s failed with an internal error: %v", op, err))
		return
	}
	r.logf("%s on %s: %v", op, session, err)
}

// absorb takes a call's answer into the model: what it told, what its check
// found (judged against the model), and the value it set when it was ok.
func (r *chaosRun) absorb(s *chaosSession, op string, p chaosPending, res *api.Result, call int, err error) {
	r.count(s.id, op, outcome(res, err))
	if err != nil {
		r.opErr(s.id, op, err)
		return
	}
	s.hibernated = false // a call wakes a hibernated session
	t := tellOf("call", res.StateLost, strings.Join(res.Notes, "; "), res.StateRestored)
	if t != nil {
		s.tells = append(s.tells, *t)
	}
	if o, ok := parseObserved(res.Stdout); ok {
		r.judge(s, o, call)
		s.died = false
	}
	if res.Status == api.StatusKernelDied {
		// The kernel died after the check: what this result told is about
		// the state the next call finds too.
		s.died = true
		if t != nil {
			s.tells = append(s.tells, *t)
		}
	}
	if res.Status == api.StatusError {
		r.logf("%s on %s raised: %+v", op, s.id, res.Error)
	}
	if p.v != nil && res.Status == api.StatusOK {
		p.v.call, p.v.round = call, r.round
		s.values[p.v.name] = p.v
		s.files[p.file] = p.content
	}
}

// absorbResume takes an explicit resume's answer into the model.
func (r *chaosRun) absorbResume(s *chaosSession, rr *api.ResumeResult, err error) {
	o := "ok"
	if err != nil {
		o = soakErr(err)
	} else if rr.StateLost {
		o += "+state_lost"
	}
	r.count(s.id, "resume", o)
	if err != nil {
		r.opErr(s.id, "resume", err)
		return
	}
	s.hibernated = false
	if t := tellOf("resume", rr.StateLost, rr.Reason, rr.StateRestored); t != nil {
		s.tells = append(s.tells, *t)
	}
}

// judge applies the invariant to everything s holds, as o found it at the
// session's call number call, with what s was told since its last observation.
func (r *chaosRun) judge(s *chaosSession, o *chaosObserved, call int) {
	tells := s.tells
	s.tells = nil
	if c := s.claim; c != nil {
		s.claim = nil
		claimed := false
		for n := range c.values {
			_, found := o.V[n]
			claimed = claimed || found
		}
		for _, t := range tells {
			claimed = claimed || (t.restored != nil && strings.HasPrefix(t.restored.From, "fork:"))
		}
		if claimed {
			maps.Copy(s.values, c.values)
			maps.Copy(s.files, c.files)
		} else {
			r.logf("the fork of %s into %s in flight at the stop was not made (%s has none of its values)", c.source, s.id, s.id)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.values)) {
		v := s.values[name]
		got, found := o.V[name]
		verdict, why := judgeValue(v, got, found, tells)
		r.n.values++
		switch verdict {
		case chaosKept:
			r.n.kept++
		case chaosToldLost:
			r.n.told++
			delete(s.values, name)
		case chaosSilentLost:
			r.n.silent++
			delete(s.values, name)
			r.violate(s.id, "silently lost: "+why)
		case chaosMisreported:
			r.n.misreported++
			r.violate(s.id, "misreported: "+why)
		}
		if found && call > 0 && v.call >= call {
			// The session's count went back (a restart kept an older one): the
			// value is from before this call in the new count.
			r.logf("session %s's call count went back: %s was set by call %d, and is there at call %d", s.id, name, v.call, call)
			v.call = call - 1
		}
	}
	for _, path := range slices.Sorted(maps.Keys(s.files)) {
		got, found := o.F[path]
		r.n.files++
		if bad := judgeFile(path, s.files[path], got, found); bad != "" {
			r.n.badFiles++
			r.violate(s.id, fmt.Sprintf("file %s (written by an ok call, %q) is %s; told: %s", path, s.files[path], bad, chaosTells(tells)))
			delete(s.files, path)
			continue
		}
		r.n.intact++
	}
}

// chaosTells describes what a session was told, for a breach's report.
func chaosTells(tells []chaosTell) string {
	if len(tells) == 0 {
		return "nothing"
	}
	var parts []string
	for _, t := range tells {
		s := fmt.Sprintf("%s: state_lost=%t", t.where, t.lost)
		if t.why != "" {
			s += fmt.Sprintf(" (%s)", t.why)
		}
		if r := t.restored; r != nil {
			s += fmt.Sprintf(", state_restored from %s after call %d, not restored %v", r.From, r.AfterCall, r.NotRestored)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// pick draws a session (of template tmpl unless "*", not died unless any).
func (r *chaosRun) pick(tmpl string, any bool) *chaosSession {
	var list []*chaosSession
	for _, id := range r.order {
		s := r.ss[id]
		if (tmpl == "*" || s.template == tmpl) && (any || !s.died) {
			list = append(list, s)
		}
	}
	if len(list) == 0 {
		return nil
	}
	return list[r.rng.IntN(len(list))]
}

// workload runs two to four random operations.
func (r *chaosRun) workload() {
	for range 2 + r.rng.IntN(3) {
		s := r.pick("*", true)
		switch p := r.rng.IntN(100); {
		case p < 40:
			r.opCall(s, "call", "")
		case p < 55:
			r.opHibernate(s)
		case p < 65 && s.hibernated:
			r.opResume(s)
		case p < 75:
			if s = r.pick("*", false); s != nil {
				r.opFork(s)
			}
		case p < 87:
			r.opCall(s, "kernel kill", "import os\nos.kill(os.getpid(), 9)")
		default:
			// A kill from a timer: after the call, about when its checkpoint is
			// written (issue 46 item 4's reverse case).
			d := 0.02 + 0.4*r.rng.Float64()
			r.opCall(s, "kill after", fmt.Sprintf("import os, signal, threading\nthreading.Timer(%.3f, os.kill, (os.getpid(), signal.SIGKILL)).start()", d))
		}
	}
}

// opCall runs a call on s that checks, sets a new value (except for a kernel
// kill, whose value could never be acknowledged) and runs extra.
func (r *chaosRun) opCall(s *chaosSession, op, extra string) bool {
	p := r.callCode(s, op != "kernel kill", extra)
	ctx, cancel := context.WithTimeout(context.Background(), chaosCallBound)
	defer cancel()
	res, call, err := runCall(ctx, r.c, s.id, s.template, p.code)
	r.absorb(s, op, p, res, call, err)
	return err == nil && res.Status == api.StatusOK
}

func (r *chaosRun) opHibernate(s *chaosSession) bool {
	ctx, cancel := context.WithTimeout(context.Background(), chaosCallBound)
	defer cancel()
	info, err := r.c.Hibernate(ctx, s.id)
	r.count(s.id, "hibernate", soakErr(err))
	if err != nil {
		r.opErr(s.id, "hibernate", err)
		return false
	}
	s.hibernated = info.State == api.StateHibernated
	return s.hibernated
}

func (r *chaosRun) opResume(s *chaosSession) {
	ctx, cancel := context.WithTimeout(context.Background(), chaosCallBound)
	defer cancel()
	rr, err := r.c.Resume(ctx, s.id)
	r.absorbResume(s, rr, err)
}

// newID draws the id of a new session (a fork's, or one that takes a warm
// kernel), closing one the run made (but keep, the fork's source) first when
// there are too many.
func (r *chaosRun) newID(prefix, keep string) string {
	if len(r.order) >= chaosMaxSessions {
		var made []string
		for _, id := range r.order {
			if id != keep && !strings.HasPrefix(id, "ck") && !strings.HasPrefix(id, "pl") {
				made = append(made, id)
			}
		}
		if len(made) > 0 {
			id := made[r.rng.IntN(len(made))]
			ctx, cancel := context.WithTimeout(context.Background(), chaosCallBound)
			err := r.c.CloseSession(ctx, id)
			cancel()
			r.count(id, "close", soakErr(err))
			r.remove(id)
		}
	}
	r.ids++
	return fmt.Sprintf("%s%d", prefix, r.ids)
}

// opFork forks s into a new session; one time in two s is hibernated first (a
// fork of a hibernated session copies its snapshot, and s stays hibernated).
func (r *chaosRun) opFork(s *chaosSession) {
	if !s.hibernated && r.rng.IntN(2) == 0 {
		r.opHibernate(s)
	}
	id := r.newID("fk", s.id)
	ctx, cancel := context.WithTimeout(context.Background(), chaosCallBound)
	defer cancel()
	rr, err := r.c.Fork(ctx, s.id, id)
	r.forked(s, id, rr, err, "fork")
}

// forked takes a fork's answer into the model: the new session holds the
// source's values (and what the source was told since its last observation)
// and files; a fork without an answer may or may not have been made (a claim).
func (r *chaosRun) forked(src *chaosSession, id string, rr *api.ResumeResult, err error, op string) {
	o := "ok"
	if err != nil {
		o = soakErr(err)
	} else if rr.StateLost {
		o += "+state_lost"
	}
	r.count(src.id+" into "+id, op, o)
	n := newChaosSession(id, src.template)
	values := map[string]*chaosValue{}
	for k, v := range src.values {
		c := *v
		c.call = 0 // the fork's calls count from 1; its state is from before them
		values[k] = &c
	}
	if err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && ae.StatusCode < 500 && op == "fork" {
			r.opErr(src.id, op, err) // refused: nothing was made
			return
		}
		n.claim = &chaosClaim{source: src.id, values: values, files: maps.Clone(src.files)}
		n.uncertain = true
		r.add(n)
		if op == "fork" {
			r.opErr(src.id, op, err)
		}
		return
	}
	n.values, n.files = values, maps.Clone(src.files)
	n.tells = slices.Clone(src.tells)
	if t := tellOf("fork", rr.StateLost, rr.Reason, rr.StateRestored); t != nil {
		n.tells = append(n.tells, *t)
	}
	r.add(n)
}
