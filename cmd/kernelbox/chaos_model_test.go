package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kernelbox/kernelbox/api"
)

// The restart-chaos test's model (chaos_test.go runs it): what every session
// must hold, because an ok call acknowledged it, and the judge of the invariant
// of issue 46. Every call of the workload starts with a check (chaosCheckCode)
// that prints which of the session's acknowledged values and files it finds, so
// every result is an observation of the whole session; the answers since the
// previous observation (the call's own result, an explicit resume's, a fork's)
// are what the session was told.

// chaosValue is a variable an ok call set: name = v_<n>, its value n.
type chaosValue struct {
	name  string
	val   int
	call  int // the session's call that set it (api.SessionInfo.Calls after it)
	round int
}

// chaosTell is one answer that may tell a loss: a call's result, a resume's or a
// fork's.
type chaosTell struct {
	where    string // "call", "resume", "fork"
	lost     bool
	why      string
	restored *api.StateRestored
}

// chaosClaim is a fork that was in flight when serve was stopped: its session
// may exist or not. If its first observation finds any of the source's values,
// or is told it was restored from the fork, the session claims to be the fork
// and is held to the source's values and files; otherwise the fork was not made.
type chaosClaim struct {
	source string
	values map[string]*chaosValue
	files  map[string]string
}

// chaosSession is the model of one session.
type chaosSession struct {
	id       string
	template string                 // "" (the default) or "ckpt"
	values   map[string]*chaosValue // acknowledged and not yet told lost
	files    map[string]string      // relative path -> content, acknowledged
	tells    []chaosTell            // since the last observation
	claim    *chaosClaim
	// hibernated: the test hibernated it (or a stop with --on-stop hibernate
	// did) and nothing resumed it since; uncertain: an operation on it was in
	// flight when serve was stopped, so either state is right.
	hibernated, uncertain bool
	// died: its last call's kernel died (or a timer will kill it), and no
	// call has observed it since: not forked meanwhile.
	died bool
}

func newChaosSession(id, template string) *chaosSession {
	return &chaosSession{id: id, template: template, values: map[string]*chaosValue{}, files: map[string]string{}}
}

// tellOf is what an answer told: nil when it told nothing.
func tellOf(where string, lost bool, why string, restored *api.StateRestored) *chaosTell {
	if !lost && restored == nil {
		return nil
	}
	return &chaosTell{where: where, lost: lost, why: why, restored: restored}
}

// chaosObserved is what a check found: values by name (their repr) and files by
// path (their content); a name or path that is missing is absent.
type chaosObserved struct {
	V map[string]string `json:"v"`
	F map[string]string `json:"f"`
}

// chaosMarker starts the check's output line.
const chaosMarker = "KBCHAOS "

// parseObserved finds the check's line in a call's stdout.
func parseObserved(stdout string) (*chaosObserved, bool) {
	for _, line := range strings.Split(stdout, "\n") {
		rest, ok := strings.CutPrefix(line, chaosMarker)
		if !ok {
			continue
		}
		var o chaosObserved
		if json.Unmarshal([]byte(rest), &o) != nil {
			return nil, false
		}
		return &o, true
	}
	return nil, false
}

// chaosCheckCode is Python that prints which of s's values and files are there.
// It runs in a function deleted afterwards, so it leaves no name behind for a
// snapshot; the files are read with a with-block inside it.
func chaosCheckCode(s *chaosSession) string {
	names := make([]string, 0, len(s.values))
	files := make([]string, 0, len(s.files))
	for n := range s.values {
		names = append(names, strconv.Quote(n))
	}
	for p := range s.files {
		files = append(files, strconv.Quote(p))
	}
	if c := s.claim; c != nil {
		for n := range c.values {
			names = append(names, strconv.Quote(n))
		}
		for p := range c.files {
			files = append(files, strconv.Quote(p))
		}
	}
	sort.Strings(names)
	sort.Strings(files)
	return fmt.Sprintf(`def _kbc(names, files):
    import json
    g = globals()
    out = {"v": {n: repr(g[n]) for n in names if n in g}, "f": {}}
    for p in files:
        try:
            with open(p) as fh:
                out["f"][p] = fh.read()
        except FileNotFoundError:
            pass
    print(%q + json.dumps(out), flush=True)
_kbc([%s], [%s])
del _kbc
`, chaosMarker, strings.Join(names, ", "), strings.Join(files, ", "))
}

// chaosVerdict is how one acknowledged value fared at an observation.
type chaosVerdict int

const (
	chaosKept        chaosVerdict = iota
	chaosToldLost                 // missing, and an answer since the last observation said so
	chaosSilentLost               // missing (or changed), and nothing said so
	chaosMisreported              // there, though a checkpoint restore said it is from before its call
)

// judgeValue applies the invariant to one value: got is its repr as found (ok
// false when missing); tells are the answers since the last observation. It
// returns the verdict and, for all but kept, why.
//
// A missing value is told lost when an answer said state_lost and did not claim
// to have restored it (its name in state_restored.restored, or a checkpoint
// after its call), or listed it in state_restored.not_restored. A checkpoint
// restore from before the value's call with state_lost false is the restore of
// "N-1 as if it were current" of issue 46 item 4: silent. A value that is there
// although the checkpoint restored is said to be from before its call is the
// reverse case (an agent would re-run that call): misreported.
func judgeValue(v *chaosValue, got string, ok bool, tells []chaosTell) (chaosVerdict, string) {
	if ok && got != strconv.Itoa(v.val) {
		return chaosSilentLost, fmt.Sprintf("%s is %s, not %d", v.name, got, v.val)
	}
	if ok {
		for _, t := range tells {
			if r := t.restored; r != nil && r.From == "checkpoint" && r.AfterCall < v.call {
				return chaosMisreported, fmt.Sprintf("%s (call %d) is there, but the %s said the state was restored from the checkpoint after call %d",
					v.name, v.call, t.where, r.AfterCall)
			}
		}
		return chaosKept, ""
	}
	for _, t := range tells {
		r := t.restored
		if r != nil {
			if why, listed := r.NotRestored[v.name]; listed {
				return chaosToldLost, fmt.Sprintf("%s not restored (%s): %s", v.name, t.where, why)
			}
		}
		claimed := r != nil && (slices.Contains(r.Restored, v.name) || (r.From == "checkpoint" && r.AfterCall >= v.call))
		if t.lost && !claimed {
			return chaosToldLost, fmt.Sprintf("%s lost, told by the %s: %s", v.name, t.where, t.why)
		}
	}
	why := "nothing said so"
	for _, t := range tells {
		if r := t.restored; r != nil {
			why = fmt.Sprintf("the %s said state_lost=%t, state_restored from %s", t.where, t.lost, r.From)
			if r.From == "checkpoint" {
				why += fmt.Sprintf(" after call %d", r.AfterCall)
			}
			why += fmt.Sprintf(" restored %v, not_restored %v", r.Restored, r.NotRestored)
		} else if t.lost {
			why = fmt.Sprintf("the %s said state_lost (%s) but claimed it", t.where, t.why)
		}
	}
	return chaosSilentLost, fmt.Sprintf("%s (call %d) is missing: %s", v.name, v.call, why)
}

// judgeFile applies the file half of the invariant: a file an ok call wrote is
// never lost, emptied or changed (a restore must never touch a file, and the
// workload never deletes one). It returns "" when it is intact, or what
// happened to it.
func judgeFile(path, want, got string, ok bool) string {
	switch {
	case !ok:
		return "missing"
	case got == "" && want != "":
		return "emptied"
	case got != want:
		return fmt.Sprintf("changed to %q", got)
	}
	return ""
}
