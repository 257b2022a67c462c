package notebook_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/notebook"
)

// newNotebook builds an nbformat 4.5 notebook of code cells; a source starting with
// "#tag:NAME\n" gets that tag.
func newNotebook(t testing.TB, sources ...string) *notebook.Notebook {
	t.Helper()
	type cell struct {
		Type     string         `json:"cell_type"`
		Metadata map[string]any `json:"metadata"`
		Outputs  []any          `json:"outputs"`
		Count    *int           `json:"execution_count"`
		Source   string         `json:"source"`
	}
	cells := []cell{}
	for _, src := range sources {
		c := cell{Type: "code", Metadata: map[string]any{}, Outputs: []any{}, Source: src}
		if tag, rest, ok := strings.Cut(strings.TrimPrefix(src, "#tag:"), "\n"); ok && strings.HasPrefix(src, "#tag:") {
			c.Metadata["tags"] = []string{tag}
			c.Source = rest
		}
		cells = append(cells, c)
	}
	b, err := json.Marshal(map[string]any{"nbformat": 4, "nbformat_minor": 5, "metadata": map[string]any{}, "cells": cells})
	require.NoError(t, err)
	nb, err := notebook.Parse(b)
	require.NoError(t, err)
	return nb
}

func streamText(c *notebook.Cell, name string) string {
	var b strings.Builder
	for _, o := range c.Outputs {
		if o.OutputType == "stream" && o.Name == name {
			b.WriteString(o.Text)
		}
	}
	return b.String()
}

// TestRunParameters checks that parameters are injected after the parameters cell,
// override its defaults, and show in the outputs.
func TestRunParameters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	nb := readFixture(t, "parameters")
	var params []notebook.Parameter
	for _, a := range []string{"alpha=2", "name=kernel box", "flag=True", `items=[1, "two", null]`, `config={"depth": 3, "on": false}`, "nothing=None"} {
		p, err := notebook.ParseAssignment(a)
		require.NoError(t, err)
		params = append(params, p)
	}
	var progress []notebook.CellResult
	rep := runNotebook(t, e, nb, notebook.RunOptions{Parameters: params, OnCell: func(c notebook.CellResult) { progress = append(progress, c) }})
	require.Equal(t, api.StatusOK, rep.Status)
	require.Nil(t, rep.FailedCell)

	require.Len(t, nb.Cells, 5)
	inj := nb.Cells[2]
	require.Equal(t, []string{"injected-parameters"}, inj.Tags())
	require.Equal(t, "# Parameters\nalpha = 2\nname = \"kernel box\"\nflag = True\nitems = [1, \"two\", None]\nconfig = {\"depth\": 3, \"on\": False}\nnothing = None\n", inj.Source)
	require.Equal(t, 2, *inj.ExecutionCount)
	require.Equal(t, "2 'kernel box' True [1, 'two', None] {'depth': 3, 'on': False} None\n", streamText(nb.Cells[3], "stdout"))
	require.Equal(t, "4", plain(t, nb.Cells[4]))
	require.Equal(t, 4, *nb.Cells[4].ExecutionCount)

	require.Len(t, progress, 4, "one progress report per code cell")
	for i, c := range progress {
		require.Equal(t, i+1, c.Index)
		require.Equal(t, api.StatusOK, c.Status)
		require.Equal(t, i+1, c.ExecutionCount)
	}
	validate(t, encode(t, nb))

	// The default session was closed.
	require.Empty(t, e.Sessions())
}

func plain(t testing.TB, c *notebook.Cell) string {
	t.Helper()
	for _, o := range c.Outputs {
		if o.OutputType == "execute_result" {
			s, err := api.MultilineString(o.Data["text/plain"])
			require.NoError(t, err)
			return s
		}
	}
	return ""
}

// TestRunStopsAtError checks that a failing cell stops the run, is reported with its
// index and traceback, and that the output notebook is still valid.
func TestRunStopsAtError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	nb := readFixture(t, "fail")
	before := nb.Cells[2].Outputs
	rep := runNotebook(t, e, nb, notebook.RunOptions{})
	require.Equal(t, api.StatusError, rep.Status)
	require.NotNil(t, rep.FailedCell)
	require.Equal(t, 1, *rep.FailedCell)
	require.Equal(t, "ValueError", rep.Error.Ename)
	require.Equal(t, "bad value", rep.Error.Evalue)
	require.NotEmpty(t, rep.Error.Traceback)
	require.Contains(t, strings.Join(rep.Error.Traceback, "\n"), `raise ValueError("bad value")`)
	for _, l := range rep.Error.Traceback {
		require.NotContains(t, l, "\x1b[", "no ANSI colors in the report")
	}
	require.Len(t, rep.Cells, 2)

	failed := nb.Cells[1]
	require.Equal(t, "before\n", streamText(failed, "stdout"))
	last := failed.Outputs[len(failed.Outputs)-1]
	require.Equal(t, "error", last.OutputType)
	require.Equal(t, "ValueError", last.Ename)
	require.Nil(t, nb.Cells[2].ExecutionCount, "cells after the failure do not run")
	require.Equal(t, before, nb.Cells[2].Outputs)
	validate(t, encode(t, nb))

	// With AllowErrors the run goes on, and still reports the first failure.
	nb = readFixture(t, "fail")
	rep = runNotebook(t, e, nb, notebook.RunOptions{AllowErrors: true})
	require.Equal(t, api.StatusError, rep.Status)
	require.Equal(t, 1, *rep.FailedCell)
	require.Len(t, rep.Cells, 3)
	require.Equal(t, "never\n", streamText(nb.Cells[2], "stdout"))
}

// TestRunRaisesException checks that raises-exception cells may fail and that the
// run goes on with the kernel's state.
func TestRunRaisesException(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	nb := newNotebook(t, "x = 1", "#tag:raises-exception\nx = 2\n1/0", "#tag:raises-exception\nprint('no error here')", "print(x)")
	rep := runNotebook(t, e, nb, notebook.RunOptions{})
	require.Equal(t, api.StatusOK, rep.Status, "%+v", rep.Error)
	require.True(t, rep.Cells[1].ExpectedError)
	require.Equal(t, api.StatusError, rep.Cells[1].Status)
	require.Equal(t, "ZeroDivisionError", rep.Cells[1].Error.Ename)
	require.False(t, rep.Cells[2].ExpectedError)
	require.Equal(t, "2\n", streamText(nb.Cells[3], "stdout"))
}

// TestRunCellTimeout checks that a cell past its timeout is reported as a timeout with
// its index, stops the run, and keeps the output it printed.
func TestRunCellTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	nb := newNotebook(t, "x = 1", "import time\nprint('started', flush=True)\ntime.sleep(60)", "print(x)")
	start := time.Now()
	rep := runNotebook(t, e, nb, notebook.RunOptions{CellTimeout: 2 * time.Second, AllowErrors: true})
	require.Less(t, time.Since(start), 30*time.Second)
	require.Equal(t, api.StatusTimeout, rep.Status)
	require.Equal(t, 1, *rep.FailedCell)
	require.Equal(t, "Timeout", rep.Error.Ename)
	require.Equal(t, api.StatusTimeout, rep.Cells[1].Status)
	require.Len(t, rep.Cells, 2, "a timeout stops the run even with AllowErrors")
	require.Equal(t, "started\n", streamText(nb.Cells[1], "stdout"))
	require.Nil(t, nb.Cells[2].ExecutionCount)
	validate(t, encode(t, nb))
}

// TestRunInputsAndSession checks that inputs are staged once, into inputs/, and that a
// named session is kept open with its state.
func TestRunInputsAndSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	csv := filepath.Join(e.Data, "numbers.csv")
	require.NoError(t, os.WriteFile(csv, []byte("1\n2\n3\n"), 0o644))
	nb := newNotebook(t,
		"total = sum(int(l) for l in open('inputs/numbers.csv'))\ntotal",
		"import os\nprint(sorted(os.listdir('inputs')))\nopen('outputs/total.txt', 'w').write(str(total))")
	rep := runNotebook(t, e, nb, notebook.RunOptions{SessionID: "nb-inputs", Inputs: []string{csv}})
	require.Equal(t, api.StatusOK, rep.Status, "%+v", rep.Error)
	require.Equal(t, "nb-inputs", rep.SessionID)
	require.Equal(t, "6", plain(t, nb.Cells[0]))
	require.Equal(t, "['numbers.csv']\n", streamText(nb.Cells[1], "stdout"))
	var names []string
	for _, a := range rep.Artifacts {
		names = append(names, a.Name)
	}
	require.Contains(t, names, "total.txt")

	// The named session is still open, with the notebook's variables.
	r, err := e.Execute(context.Background(), api.Request{SessionID: "nb-inputs", Code: "total"})
	require.NoError(t, err)
	require.Equal(t, "6", r.Result)
}

// TestRunRefused checks that a call the executor refuses ends the run with an error.
func TestRunRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	nb := newNotebook(t, "1")
	rep, err := notebook.Run(context.Background(), e.Executor, nb, notebook.RunOptions{Inputs: []string{"/etc/shadow"}})
	require.ErrorIs(t, err, api.ErrDenied)
	require.Equal(t, 0, *rep.FailedCell)

	_, err = notebook.Run(context.Background(), e.Executor, nb, notebook.RunOptions{SessionID: "../bad"})
	require.ErrorIs(t, err, api.ErrInvalidRequest)

	_, err = notebook.Run(context.Background(), e.Executor, nb, notebook.RunOptions{
		Parameters: []notebook.Parameter{{Name: "not valid", Value: json.RawMessage("1")}},
	})
	require.ErrorIs(t, err, notebook.ErrInvalidParameter)
	require.Len(t, nb.Cells, 1, "nothing injected")
}
