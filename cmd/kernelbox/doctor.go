package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/internal/pyfind"
)

// reportFunc reports one finding of doctor: what was checked, what was found, and
// when it is not good, how to fix it.
type reportFunc func(good bool, what, detail, fix string)

// doctorCmd runs each backend's check (the backend table's doctor), then the one
// the kernel image's build needs.
func doctorCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("doctor", stderr)
	fs.intro = "Usage: kernelbox doctor [flags]\n\nChecks what each backend needs on this machine, with the backends' flags as serve takes them."
	var c backendConfig
	maxSessions := fs.Int("max-sessions", 0, "session cap to check against the docker daemon's memory (as for serve)")
	for _, g := range doctorFlags() {
		fs.add(g.title, func(fs *flag.FlagSet) { g.doctor(&c, fs) })
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	ok := true
	report := func(good bool, what, detail, fix string) {
		mark := "ok  "
		if !good {
			mark, ok = "FAIL", false
		}
		fmt.Fprintf(stdout, "[%s] %-22s %s\n", mark, what, detail)
		if !good && fix != "" {
			fmt.Fprintf(stdout, "       fix: %s\n", fix)
		}
	}
	for _, b := range backends() {
		if b.doctor != nil {
			b.doctor(ctx, &c, *maxSessions, report)
		}
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		report(false, "debootstrap", "not found (needed only to build the kernel image)", "apt-get install debootstrap")
	} else {
		report(true, "debootstrap", "found", "")
	}
	if !ok {
		return exitCode{1, "some checks failed; see the fixes above"}
	}
	return nil
}

// doctorFlags are the groups of backend flags the table marks for doctor: the
// Python and the image it checks, the memory it checks against the daemon's, and
// the swarm manager it checks when given one.
func doctorFlags() []backendFlags {
	var out []backendFlags
	for _, b := range backends() {
		for _, g := range b.flags {
			if g.doctor != nil && !slices.ContainsFunc(out, func(o backendFlags) bool { return o.title == g.title }) {
				out = append(out, g)
			}
		}
	}
	return out
}

// doctorPython checks the Python the local backend (and the benchmark's reference)
// runs: jupyter_server and ipykernel importable.
func doctorPython(ctx context.Context, c *backendConfig, _ int, report reportFunc) {
	py, err := pyfind.Find(c.python)
	if err != nil {
		report(false, "python + jupyter", err.Error(), "bash scripts/setup.sh  (or: apt-get install python3-jupyter-server python3-ipykernel python3-pandas python3-matplotlib)")
		return
	}
	report(true, "python + jupyter", py+" "+pythonVersions(ctx, py), "")
}

func pythonVersions(ctx context.Context, py string) string {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, py, "-c",
		"import sys, jupyter_server, ipykernel; print('python %d.%d, jupyter_server %s, ipykernel %s' % (sys.version_info[0], sys.version_info[1], jupyter_server.__version__, ipykernel.__version__))").Output()
	if err != nil {
		return ""
	}
	return "(" + strings.TrimSpace(string(out)) + ")"
}
