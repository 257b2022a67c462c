package main

import (
	"bufio"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent), with the build
// events go test adds (ImportPath, build-output, build-fail).
type event struct {
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Output     string
	ImportPath string
}

// key names one test of one package.
type key struct{ pkg, test string }

// timing is one finished top-level test.
type timing struct {
	key
	secs   float64
	result string
}

// log keeps each running test's output until the test ends: it is printed when the
// test fails (or never ends), dropped when it passes or is skipped.
type log struct {
	w       *bufio.Writer
	out     map[key]*strings.Builder
	order   []key // tests in the order they started, to print unfinished ones
	running map[string]bool
	times   []timing
	failed  bool
}

func newLog(w *bufio.Writer) *log {
	return &log{w: w, out: map[key]*strings.Builder{}, running: map[string]bool{}}
}

func (l *log) print(s string) {
	_, _ = l.w.WriteString(s)
	if strings.HasSuffix(s, "\n") {
		_ = l.w.Flush() // a person watching make test sees each package as it ends
	}
}

func (l *log) handle(ev event) {
	switch ev.Action {
	case "build-output":
		l.print(ev.Output)
		return
	case "build-fail":
		l.failed = true
		return
	}
	if ev.Test == "" {
		l.packageEvent(ev)
		return
	}
	k := key{ev.Package, ev.Test}
	switch ev.Action {
	case "run":
		l.out[k] = &strings.Builder{}
		l.order = append(l.order, k)
	case "output":
		if b := l.out[k]; b != nil && !isProgress(ev.Output) {
			b.WriteString(ev.Output)
		}
	case "pass", "skip", "fail":
		if ev.Action == "fail" {
			l.failed = true
			if b := l.out[k]; b != nil {
				l.print(b.String())
			}
		}
		delete(l.out, k)
		if !strings.Contains(ev.Test, "/") {
			l.times = append(l.times, timing{k, ev.Elapsed, ev.Action})
		}
	}
}

// isProgress says whether a line is one that only -v prints (go test -json implies -v).
func isProgress(s string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- SKIP"} {
		if strings.HasPrefix(strings.TrimLeft(s, " "), p) {
			return true
		}
	}
	return false
}

// packageEvent prints a package's own output (its ok/FAIL line, TestMain's words, a
// panic) and, when the package failed, the output of its tests that never ended (a
// timeout's panic names them).
func (l *log) packageEvent(ev event) {
	switch ev.Action {
	case "start":
		l.running[ev.Package] = true
	case "output":
		if ev.Output != "PASS\n" {
			l.print(ev.Output)
		}
	case "pass", "skip", "fail":
		delete(l.running, ev.Package)
		if ev.Action == "fail" {
			l.failed = true
		}
		l.flushPackage(ev.Package, ev.Action == "fail")
	}
}

// flushPackage drops (or prints, when show is set) what is kept of pkg's tests.
func (l *log) flushPackage(pkg string, show bool) {
	for _, k := range l.order {
		if b := l.out[k]; k.pkg == pkg && b != nil {
			if show {
				l.print(fmt.Sprintf("--- output of %s, which did not end:\n%s", k.test, b.String()))
			}
			delete(l.out, k)
		}
	}
	l.order = slices.DeleteFunc(l.order, func(k key) bool { return k.pkg == pkg })
}

// unfinished reports packages whose end never came (go test was killed).
func (l *log) unfinished() {
	for _, pkg := range slices.Sorted(maps.Keys(l.running)) {
		l.failed = true
		l.print(fmt.Sprintf("FAIL\t%s\t(the test stream ended before the package did)\n", pkg))
		l.flushPackage(pkg, true)
	}
}

// summary lists the n slowest top-level tests.
func (l *log) summary(n int) {
	if n <= 0 || len(l.times) == 0 {
		return
	}
	slices.SortStableFunc(l.times, func(a, b timing) int { return cmp.Compare(b.secs, a.secs) })
	total := 0.0
	for _, t := range l.times {
		total += t.secs
	}
	l.print(fmt.Sprintf("== the %d slowest of %d tests (their own times; parallel tests overlap, so the times add up to %.0f s, more than the run)\n",
		min(n, len(l.times)), len(l.times), total))
	for _, t := range l.times[:min(n, len(l.times))] {
		l.print(fmt.Sprintf("%8.1f s  %-4s %s %s\n", t.secs, t.result, strings.TrimPrefix(t.pkg, "github.com/kernelbox/kernelbox/"), t.test))
	}
}
