package notebook_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/kernelbox/kernelbox/notebook"
	"github.com/stretchr/testify/require"
)

func TestParseValue(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"1":                  `1`,
		"-2.5e3":             `-2.5e3`,
		"True":               `true`,
		"true":               `true`,
		"False":              `false`,
		"false":              `false`,
		"None":               `null`,
		"null":               `null`,
		`"quoted"`:           `"quoted"`,
		`[1, "a", null]`:     `[1, "a", null]`,
		`{"k": {"n": true}}`: `{"k": {"n": true}}`,
		"hello":              `"hello"`,
		"01":                 `"01"`,
		"NaN":                `"NaN"`,
		"":                   `""`,
		"a=b":                `"a=b"`,
		"[1, 2":              `"[1, 2"`,
	} {
		require.JSONEq(t, want, string(notebook.ParseValue(in)), "ParseValue(%q)", in)
	}
}

func TestParseAssignment(t *testing.T) {
	t.Parallel()
	p, err := notebook.ParseAssignment("alpha=0.5")
	require.NoError(t, err)
	require.Equal(t, notebook.Parameter{Name: "alpha", Value: json.RawMessage("0.5")}, p)
	p, err = notebook.ParseAssignment("s=a=b")
	require.NoError(t, err)
	require.JSONEq(t, `"a=b"`, string(p.Value))
	for _, bad := range []string{"noequals", "=1", "1x=1", "a-b=1", "class=1", "None=1", "a b=1", "a.b=1"} {
		_, err := notebook.ParseAssignment(bad)
		require.ErrorIs(t, err, notebook.ErrInvalidParameter, bad)
	}
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"x": true, "_x": true, "x1": true, "größe": true, "日本": true, "match": true, "_": true,
		"": false, "1x": false, "x-y": false, "x y": false, "def": false, "True": false, "é-": false,
	} {
		require.Equal(t, want, notebook.ValidName(name), name)
	}
}

// TestParametersArePythonLiterals checks with a real Python that each injected value
// evaluates to the JSON value it came from.
func TestParametersArePythonLiterals(t *testing.T) {
	t.Parallel()
	py := nbPython(t)
	values := []string{
		`1`, `-0`, `12345678901234567890`, `2.5`, `1e-7`, `-3.25E+2`, `true`, `false`, `null`,
		`"plain"`, `"quote \" and \\ backslash"`, `"new\nline\ttab\r"`, `"ünï ✓ 🎉"`, `"\u0000\u001b\u2028\u0085"`,
		`"'single' \"\"\" triple"`, `[]`, `{}`, `[1, [2, [3, {"a": null}]]]`, `{"z": 1, "a": [true, "x"], "": {}}`,
	}
	nb, err := notebook.Parse([]byte(`{"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": []}`))
	require.NoError(t, err)
	var params []notebook.Parameter
	for i, v := range values {
		params = append(params, notebook.Parameter{Name: "p" + string(rune('a'+i)), Value: json.RawMessage(v)})
	}
	require.NoError(t, nb.InjectParameters(params))
	src := nb.Cells[0].Source
	require.True(t, strings.HasPrefix(src, "# Parameters\n"))
	require.Equal(t, len(values)+1, strings.Count(src, "\n"), "one line per parameter:\n%s", src)

	// Evaluate the cell, then compare each variable with json.loads of its value.
	want, err := json.Marshal(values)
	require.NoError(t, err)
	script := src + `
import json, sys
values = json.loads(sys.argv[1])
for i, v in enumerate(values):
    got = globals()["p" + chr(ord("a") + i)]
    exp = json.loads(v)
    assert got == exp and type(got) is type(exp), (i, v, got)
    if isinstance(exp, dict):
        assert list(got) == list(exp), ("key order", v, got)
print("ok")
`
	out, err := exec.Command(py, "-c", script, string(want)).CombinedOutput()
	require.NoError(t, err, "%s\n%s", out, src)
	require.Equal(t, "ok\n", string(out))
}

func TestInjectParametersPlacement(t *testing.T) {
	t.Parallel()
	parse := func(cells string) *notebook.Notebook {
		nb, err := notebook.Parse([]byte(`{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [` + cells + `]}`))
		require.NoError(t, err)
		return nb
	}
	code := func(src, tag string) string {
		meta := `{}`
		if tag != "" {
			meta = `{"tags": ["` + tag + `"]}`
		}
		return `{"cell_type": "code", "metadata": ` + meta + `, "outputs": [], "execution_count": null, "source": "` + src + `"}`
	}
	a := []notebook.Parameter{{Name: "a", Value: json.RawMessage(`1`)}}

	// After the first parameters cell.
	nb := parse(code("x = 0", "") + "," + code("a = 0", "parameters") + "," + code("print(a)", "") + "," + code("b = 0", "parameters"))
	require.NoError(t, nb.InjectParameters(a))
	require.Len(t, nb.Cells, 5)
	require.Equal(t, "# Parameters\na = 1\n", nb.Cells[2].Source)
	require.Equal(t, []string{"injected-parameters"}, nb.Cells[2].Tags())
	require.NotEmpty(t, nb.Cells[2].ID, "nbformat 4.5 cells need an id")
	require.Equal(t, "print(a)", nb.Cells[3].Source)

	// Without a parameters cell: at the top.
	nb = parse(code("print(a)", ""))
	require.NoError(t, nb.InjectParameters(a))
	require.Len(t, nb.Cells, 2)
	require.True(t, nb.Cells[0].HasTag("injected-parameters"))

	// A second injection replaces the first (running an output notebook again).
	require.NoError(t, nb.InjectParameters([]notebook.Parameter{{Name: "a", Value: json.RawMessage(`2`)}}))
	require.Len(t, nb.Cells, 2)
	require.Equal(t, "# Parameters\na = 2\n", nb.Cells[0].Source)

	// No parameters: nothing injected.
	nb = parse(code("print(1)", ""))
	require.NoError(t, nb.InjectParameters(nil))
	require.Len(t, nb.Cells, 1)

	// Bad names, duplicates and bad values are refused and change nothing.
	for _, bad := range [][]notebook.Parameter{
		{{Name: "1a", Value: json.RawMessage(`1`)}},
		{{Name: "lambda", Value: json.RawMessage(`1`)}},
		{{Name: "a", Value: json.RawMessage(`1`)}, {Name: "a", Value: json.RawMessage(`2`)}},
		{{Name: "a", Value: json.RawMessage(`{"x":`)}},
		{{Name: "a", Value: json.RawMessage(`1 2`)}},
		{{Name: "a", Value: nil}},
	} {
		err := nb.InjectParameters(bad)
		require.ErrorIs(t, err, notebook.ErrInvalidParameter, "%v", bad)
		require.Len(t, nb.Cells, 1)
	}
}
