package main

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"strings"
)

// cells holds the scripted analyst's code, one file per step.
//
//go:embed cells/*.py
var cells embed.FS

// step is one call of the scripted plan.
type step struct {
	// title says what the analyst is doing, for the progress line.
	title string
	// cell is the file in cells/ holding the code.
	cell string
	// prelude is code run before the cell's, in the same call.
	prelude string
	// inputs are the paths to stage, relative to the project directory.
	inputs []string
	// wantDenied marks the step that shows the permission engine: the policy must
	// refuse it, and the plan carries on.
	wantDenied bool
}

// code is the Python the step sends.
func (s step) code() (string, error) {
	b, err := cells.ReadFile("cells/" + s.cell)
	if err != nil {
		return "", err
	}
	return s.prelude + string(b), nil
}

// plan is the scripted analyst's work on the brief. Only the first step reads the
// CSV; every later one uses the DataFrame df that the kernel kept.
func plan(q string) []step {
	quoted, _ := json.Marshal(q) // a JSON string is a valid Python string literal
	return []step{
		{title: "load benchmarks.csv into a DataFrame", cell: "1_load.py", inputs: []string{"benchmarks.csv"},
			prelude: "QUESTION = " + string(quoted) + "\n" +
				"PRELOADED = sorted(n for n in ('pd', 'plt') if n in globals())  # what the session's template imported\n"},
		{title: "inspect the table", cell: "2_inspect.py"},
		{title: "compute top-1 % per million parameters, best overall and per year", cell: "3_compute.py"},
		{title: "try to stage the project's .ssh/id_rsa (a decoy the policy must refuse)", cell: "4_stage_key.py",
			inputs: []string{".ssh/id_rsa"}, wantDenied: true},
		{title: "plot accuracy vs. parameters and the best per year", cell: "5_plot.py"},
		{title: "write the report", cell: "6_report.py"},
	}
}

// scriptedAnalyst follows plan: the analyst without a model.
type scriptedAnalyst struct {
	tool    tool
	session string
	p       *printer
}

func (a *scriptedAnalyst) analyse(ctx context.Context, _ string) (finding, error) {
	var f finding
	steps := plan(question)
	var last outcome
	for i, s := range steps {
		code, err := s.code()
		if err != nil {
			return f, err
		}
		args := toolArgs{Code: code, SessionID: a.session, Inputs: s.inputs}
		a.p.stepStart(fmt.Sprintf("%d/%d", i+1, len(steps)), "data_analyst", s.title)
		o, err := call(ctx, a.tool, args)
		f.steps++
		a.p.stepEnd(args, o, s.cell)
		if err != nil {
			return f, err
		}
		switch {
		case s.wantDenied && o.denied == nil:
			return f, fmt.Errorf("step %d: the policy let %v through; it must refuse it", i+1, s.inputs)
		case s.wantDenied:
			a.p.note("the call was refused before anything was staged or run; the session is untouched and the analyst carries on")
			continue
		case o.status() != "ok":
			return f, fmt.Errorf("step %d (%s) ended with status %s", i+1, s.title, o.status())
		}
		f.addArtifacts(o.res.Artifacts)
		last = o
	}
	// The last cell prints the answer on a line of its own.
	for _, line := range strings.Split(last.res.Stdout, "\n") {
		if rest, ok := strings.CutPrefix(line, "answer: "); ok {
			f.message = rest
		}
	}
	if f.message == "" {
		f.message = "(the report cell printed no answer line)"
	}
	return f, nil
}

// probePolicy runs the plan's step that the policy must refuse, for an analyst that
// does not follow the plan.
func probePolicy(ctx context.Context, t tool, session string, p *printer) error {
	for _, s := range plan(question) {
		if !s.wantDenied {
			continue
		}
		code, err := s.code()
		if err != nil {
			return err
		}
		args := toolArgs{Code: code, SessionID: session, Inputs: s.inputs}
		p.stepStart("policy check", "data_analyst", s.title)
		o, err := call(ctx, t, args)
		p.stepEnd(args, o, s.cell)
		if err != nil {
			return err
		}
		if o.denied == nil {
			return fmt.Errorf("the policy let %v through; it must refuse it", s.inputs)
		}
		p.note("refused before anything was staged or run; the analyst starts with an untouched session")
	}
	return nil
}
