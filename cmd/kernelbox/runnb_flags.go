package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/kernelbox/kernelbox/notebook"
)

// runOptions is the parsed and checked command line of `kernelbox run`.
type runOptions struct {
	engine      *engineFlags
	in          string // the notebook's path, "-" for stdin
	nb          *notebook.Notebook
	out         string // where the executed notebook goes, "-" for stdout
	params      []notebook.Parameter
	inputs      []string // host files to stage, absolute where possible
	cellTimeout time.Duration
	allowErrors bool
	quiet       bool
}

// parseRunArgs parses the command line of `kernelbox run` and checks everything
// that can be checked before a kernel starts: it reads the notebook, parses the
// parameters and checks that the output's directory exists. Its errors are
// exitCode 2 (bad usage or input), except a flag error, which flag has already
// reported.
func parseRunArgs(args []string, stderr io.Writer) (*runOptions, error) {
	o := &runOptions{engine: newEngineFlags("local")}
	var params, inputs multiFlag
	fs := o.flagSet(stderr, &params, &inputs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != 1 {
		fs.Usage()
		return nil, exitCode{2, "run takes one notebook: kernelbox run [flags] IN.ipynb"}
	}
	o.in = pos[0]
	if o.nb, err = readNotebook(o.in); err != nil {
		return nil, exitCode{2, err.Error()}
	}
	for _, a := range params {
		p, err := notebook.ParseAssignment(a)
		if err != nil {
			return nil, exitCode{2, "-p " + err.Error()}
		}
		o.params = append(o.params, p)
	}
	if o.out == "" {
		o.out = defaultOutput(o.in)
	}
	if o.out != "-" {
		if fi, err := os.Stat(filepath.Dir(o.out)); err != nil || !fi.IsDir() {
			return nil, exitCode{2, fmt.Sprintf("-o %s: the directory %s does not exist", o.out, filepath.Dir(o.out))}
		}
	}
	// The permission policy resolves paths itself; absolute paths make what it
	// checks, and what the messages say, unambiguous.
	for i, p := range inputs {
		if abs, err := filepath.Abs(p); err == nil {
			inputs[i] = abs
		}
	}
	o.inputs = inputs
	return o, nil
}

// runUsage is what `kernelbox run -h` prints above the flags.
const runUsage = `Usage: kernelbox run [flags] IN.ipynb

Runs the notebook's code cells in order in one kernel and writes the executed notebook.
Exit status: 0 ok, 1 a cell failed (the output notebook is still written), 2 bad usage or input.`

// flagSet returns run's flags: its own ("Notebook"), the engine's and the
// backends'. No pool, calls or MCP flags: run serves no client and has one
// session. -h shows the flags of the backend --backend names (the local one by
// default) and names the other backends' groups on one line.
func (o *runOptions) flagSet(stderr io.Writer, params, inputs *multiFlag) *flagSet {
	fs := newFlags("run", stderr)
	fs.intro = runUsage
	fs.add("Notebook", func(fs *flag.FlagSet) { o.register(fs, params, inputs) })
	fs.add("Engine", o.engine.register)
	o.engine.backends.register(fs)
	fs.show = func(title string) bool {
		group, read := isBackendGroup(title, o.engine.backend)
		return !group || read
	}
	fs.hideNote = " (kernelbox run --backend NAME -h shows them)"
	return fs
}

// register defines run's own flags on fs, writing into o; the repeatable -p and
// --input go to params and inputs.
func (o *runOptions) register(fs *flag.FlagSet, params, inputs *multiFlag) {
	fs.StringVar(&o.out, "o", "", "output notebook; - for stdout (default: IN.out.ipynb next to IN, or stdout when IN is -)")
	fs.Var(params, "p", "NAME=VALUE: inject a parameter, papermill style (repeatable); VALUE is JSON, a number, true/false/None, or else a string")
	fs.Var(inputs, "input", "host file to stage as inputs/<basename> before the first cell (repeatable)")
	fs.DurationVar(&o.cellTimeout, "cell-timeout", 0, "timeout of each cell (default: --timeout)")
	fs.BoolVar(&o.allowErrors, "allow-errors", false, "keep running after a cell raises (the run still exits 1); cells tagged raises-exception may always raise")
	fs.BoolVar(&o.quiet, "quiet", false, "do not print a progress line per cell")
}

// parseInterspersed parses flags that may come before or after the positional
// arguments (`kernelbox run in.ipynb -o out.ipynb`), which package flag alone does
// not allow, and returns the positional ones. Everything after "--" is positional.
func parseInterspersed(fs *flagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// readNotebook reads a notebook file, or stdin for "-".
func readNotebook(path string) (*notebook.Notebook, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	nb, err := notebook.Read(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return nb, nil
}
