package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/stretchr/testify/require"
)

// runCLI runs `kernelbox run` with args in dir and returns its exit code (0, or the
// exitCode's), stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := dispatch(context.Background(), append([]string{"run"}, args...), &stdout, &stderr)
	code := 0
	if err != nil {
		var ec exitCode
		require.True(t, errors.As(err, &ec), "unexpected error: %v", err)
		code = ec.code
		stderr.WriteString("\nkernelbox: " + ec.msg + "\n")
	}
	return code, stdout.String(), stderr.String()
}

// writeNB writes an nbformat 4.5 notebook of code cells (tags per cell, may be nil).
func writeNB(t *testing.T, path string, tags [][]string, sources ...string) {
	t.Helper()
	var cells []map[string]any
	for i, src := range sources {
		meta := map[string]any{}
		if i < len(tags) && tags[i] != nil {
			meta["tags"] = tags[i]
		}
		cells = append(cells, map[string]any{"cell_type": "code", "id": "c" + string(rune('a'+i)), "metadata": meta,
			"outputs": []any{}, "execution_count": nil, "source": src})
	}
	b, err := json.Marshal(map[string]any{"nbformat": 4, "nbformat_minor": 5, "metadata": map[string]any{}, "cells": cells})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

func validateNB(t *testing.T, path string) map[string]any {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import nbformat").Run(); err == nil {
		out, err := exec.Command("/usr/bin/python3", "-c",
			"import nbformat,sys; nbformat.validate(nbformat.read(sys.argv[1], as_version=4))", path).CombinedOutput()
		require.NoError(t, err, "nbformat.validate: %s", out)
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var nb map[string]any
	require.NoError(t, json.Unmarshal(b, &nb))
	return nb
}

func cellText(nb map[string]any, i int) string {
	c := nb["cells"].([]any)[i].(map[string]any)
	b, _ := json.Marshal(c["outputs"])
	return string(b)
}

func TestRunCommand(t *testing.T) {
	py := testenv.Jupyter(t)
	dir := t.TempDir()
	engine := []string{"--python", py, "--workspace", filepath.Join(dir, "ws"), "--workdir", dir, "--log-level", "warn"}

	t.Run("parameters and inputs", func(t *testing.T) {
		in := filepath.Join(dir, "report.ipynb")
		writeNB(t, in, [][]string{{"parameters"}}, "alpha = 1\nname = 'x'", "print(alpha * 2, name, open('inputs/data.txt').read())")
		require.NoError(t, os.WriteFile(filepath.Join(dir, "data.txt"), []byte("from a file"), 0o644))
		code, _, stderr := runCLI(t, append(engine, "-p", "alpha=21", "-p", "name=kernel box", "--input", filepath.Join(dir, "data.txt"), in)...)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stderr, "UNSANDBOXED")
		require.Regexp(t, `\[1/3\] cell 0 ok \d+\.\d\ds`, stderr)
		require.Regexp(t, `\[3/3\] cell 2 ok \d+\.\d\ds`, stderr)
		require.Contains(t, stderr, "status ok: 3 cells ran, 0 skipped; wrote "+filepath.Join(dir, "report.out.ipynb"))

		nb := validateNB(t, filepath.Join(dir, "report.out.ipynb"))
		require.Len(t, nb["cells"], 3)
		require.Contains(t, cellText(nb, 2), `42 kernel box from a file`)
	})

	t.Run("failure writes the notebook and exits 1", func(t *testing.T) {
		in := filepath.Join(dir, "fail.ipynb")
		writeNB(t, in, nil, "x = 1", "print('before')\nraise ValueError('bad value')", "print('never')")
		out := filepath.Join(dir, "custom.ipynb")
		// Flags after the notebook work too.
		code, _, stderr := runCLI(t, append(append(engine, in), "-o", out)...)
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, "[2/3] cell 1 error")
		require.Contains(t, stderr, "cell 1 failed (error): ValueError: bad value")
		require.Contains(t, stderr, "raise ValueError('bad value')", "the traceback is printed")
		nb := validateNB(t, out)
		require.Contains(t, cellText(nb, 1), `"ename":"ValueError"`)
		require.Contains(t, cellText(nb, 1), `before`)
		require.Equal(t, "[]", cellText(nb, 2), "later cells do not run")

		// --allow-errors runs on, and still exits 1.
		code, stdout, stderr := runCLI(t, append(engine, "--allow-errors", "--quiet", "-o", "-", in)...)
		require.Equal(t, 1, code, stderr)
		require.NotContains(t, stderr, "[1/3]")
		require.Contains(t, stdout, `"never\n"`)
	})

	t.Run("timeout", func(t *testing.T) {
		in := filepath.Join(dir, "slow.ipynb")
		writeNB(t, in, nil, "x = 1", "import time\ntime.sleep(60)", "print(x)")
		code, _, stderr := runCLI(t, append(engine, "--cell-timeout", "1s", in)...)
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, "[2/3] cell 1 timeout")
		require.Contains(t, stderr, "cell 1 failed (timeout)")
		validateNB(t, filepath.Join(dir, "slow.out.ipynb"))
	})
}

// TestRunCommandBadInput checks the failures caught before any kernel starts.
func TestRunCommandBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	good := write("good.ipynb", `{"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": []}`)
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no notebook":     {nil, "run takes one notebook"},
		"two notebooks":   {[]string{good, good}, "run takes one notebook"},
		"missing file":    {[]string{filepath.Join(dir, "nope.ipynb")}, "no such file"},
		"not json":        {[]string{write("bad.ipynb", "not json")}, "invalid notebook: not a JSON object"},
		"nbformat 3":      {[]string{write("v3.ipynb", `{"nbformat": 3, "nbformat_minor": 0, "worksheets": []}`)}, "nbformat 3 is not supported"},
		"missing cells":   {[]string{write("nocells.ipynb", `{"nbformat": 4, "nbformat_minor": 4, "metadata": {}}`)}, "no cells"},
		"bad parameter":   {[]string{"-p", "my-var=1", good}, `"my-var" is not a Python identifier`},
		"no equals":       {[]string{"-p", "alpha", good}, "want NAME=VALUE"},
		"no output dir":   {[]string{"-o", filepath.Join(dir, "missing", "out.ipynb"), good}, "does not exist"},
		"unknown flag":    {[]string{"--nope", good}, ""},
		"unknown backend": {[]string{"--backend", "nope", "--workspace", filepath.Join(dir, "ws"), good}, "unknown backend"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			require.Equal(t, 2, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}
}

func TestDefaultOutput(t *testing.T) {
	t.Parallel()
	require.Equal(t, "a/b.out.ipynb", defaultOutput("a/b.ipynb"))
	require.Equal(t, "nb.json.out.ipynb", defaultOutput("nb.json"))
	require.Equal(t, "-", defaultOutput("-"))
	id := runSessionID("/x/My Report (final).ipynb")
	require.True(t, strings.HasPrefix(id, "run-My_Report_final_-"), id)
	require.Regexp(t, `^[A-Za-z0-9_-]{1,64}$`, runSessionID(strings.Repeat("x", 100)+".ipynb"))
}

// Whatever the notebook is called, its run's session id is one the executor accepts.
func TestRunSessionIDIsValid(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ in, prefix string }{
		"plain":           {"/x/report.ipynb", "run-report-"},
		"spaces":          {"/x/My Report (final).ipynb", "run-My_Report_final_-"},
		"stdin":           {"-", "run-stdin-"},
		"only extension":  {"/x/.ipynb", "run-stdin-"},
		"dots":            {"a.b.c.ipynb", "run-a_b_c-"},
		"non-ASCII":       {"/x/résumé données.ipynb", "run-r_sum_donn_es-"},
		"only non-ASCII":  {"/x/日本語.ipynb", "run-_-"},
		"control chars":   {"/x/a\nb\x00c.ipynb", "run-a_b_c-"},
		"long":            {strings.Repeat("x", 100) + ".ipynb", "run-" + strings.Repeat("x", maxRunStem) + "-"},
		"long multi-byte": {strings.Repeat("é", 100) + ".ipynb", "run-_-"},
		"no extension":    {"/x/notes", "run-notes-"},
		"trailing slash":  {"/x/dir/", "run-dir-"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			id := runSessionID(tc.in)
			require.True(t, api.ValidSessionID(id), "%q", id)
			require.True(t, strings.HasPrefix(id, tc.prefix), "%q, want prefix %q", id, tc.prefix)
			require.NotEqual(t, id, runSessionID(tc.in), "ids of two runs must differ")
		})
	}
}
