package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/kernelbox/kernelbox/api"
)

// The artifacts the coordinator asks for, by name in the session's outputs/.
const (
	plotName   = "accuracy_per_param.png"
	reportName = "report.md"
)

// brief is what the coordinator hands the data_analyst.
func brief(q string) string {
	return "Question from the research lead: " + q + "\n" +
		"The table benchmarks.csv (one row per model: model, year, top1_accuracy in %, " +
		"params_millions, ...) is in the project directory; stage it with inputs [\"benchmarks.csv\"]. " +
		"Load it into a DataFrame once and reuse it. Compute top-1 accuracy per million parameters, " +
		"find the best model overall and per year, plot accuracy against parameters (log axis) to " +
		"outputs/" + plotName + ", and write outputs/" + reportName + " naming the best model and the trend."
}

// analyst is the data_analyst agent: it works on a brief with the sandbox_execute
// tool and reports back.
type analyst interface {
	analyse(ctx context.Context, brief string) (finding, error)
}

// finding is the analyst's answer to the coordinator.
type finding struct {
	// message is the analyst's summary in its own words.
	message string
	// artifacts are the files its calls produced, by name; the latest of each.
	artifacts map[string]api.Artifact
	// steps is how many tool calls it made.
	steps int
}

// addArtifacts records a call's artifacts in f, keeping the latest of each name.
func (f *finding) addArtifacts(arts []api.Artifact) {
	if f.artifacts == nil {
		f.artifacts = map[string]api.Artifact{}
	}
	for _, a := range arts {
		f.artifacts[a.Name] = a
	}
}

// coordinator receives the question, delegates it and checks what comes back.
type coordinator struct {
	p            *printer
	artifactsDir string
}

// answer delegates q to a and prints the answer with the artifact paths. It fails
// when the analyst did not deliver both the plot and the report.
func (c *coordinator) answer(ctx context.Context, q string, a analyst) error {
	c.p.blank()
	c.p.say("coordinator", "question: "+q)
	c.p.say("coordinator -> data_analyst", brief(q))
	c.p.blank()
	f, err := a.analyse(ctx, brief(q))
	if err != nil {
		return err
	}
	c.p.blank()
	c.p.say("data_analyst -> coordinator", f.message)

	var missing []string
	for _, want := range []string{plotName, reportName} {
		if _, ok := f.artifacts[want]; !ok {
			missing = append(missing, "outputs/"+want)
		}
	}
	names := make([]string, 0, len(f.artifacts))
	for name := range f.artifacts {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if ri, rj := rank(names[i]), rank(names[j]); ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	c.p.blank()
	c.p.say("coordinator", fmt.Sprintf("the data_analyst answered in %d steps. Artifacts, in the shared artifacts directory %s:", f.steps, c.artifactsDir))
	for _, name := range names {
		fmt.Fprintf(c.p.w, "    %-8s %s\n", label(name)+":", f.artifacts[name].Path)
	}
	if len(missing) > 0 {
		return fmt.Errorf("the data_analyst did not produce %s", strings.Join(missing, " and "))
	}
	return nil
}

// label names an artifact's role for the reader.
func label(name string) string {
	switch name {
	case plotName:
		return "plot"
	case reportName:
		return "report"
	}
	return "other"
}

// rank orders the artifacts the coordinator asked for first.
func rank(name string) int {
	switch name {
	case plotName:
		return 0
	case reportName:
		return 1
	}
	return 2
}
