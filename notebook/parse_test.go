package notebook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/kernelbox/kernelbox/notebook"
	"github.com/stretchr/testify/require"
)

func TestParseBadInput(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		in   string
		want string
	}{
		"not json":           {`{"cells": [`, "not a JSON object"},
		"not an object":      {`[1, 2]`, "not a JSON object"},
		"empty":              {``, "not a JSON object"},
		"no version":         {`{"cells": []}`, "no nbformat version"},
		"nbformat 3":         {`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": []}`, "nbformat 3 is not supported"},
		"nbformat 5":         {`{"nbformat": 5, "cells": []}`, "nbformat 5 is not supported"},
		"version not int":    {`{"nbformat": "4", "cells": []}`, "nbformat"},
		"missing cells":      {`{"nbformat": 4, "nbformat_minor": 5, "metadata": {}}`, "no cells"},
		"cells not a list":   {`{"nbformat": 4, "cells": {}}`, "cells"},
		"cell not an object": {`{"nbformat": 4, "cells": [1]}`, "cell 0"},
		"no cell type":       {`{"nbformat": 4, "cells": [{"source": ""}]}`, "cell 0: no cell_type"},
		"unknown cell type":  {`{"nbformat": 4, "cells": [{"cell_type": "heading", "source": ""}]}`, `unknown cell_type "heading"`},
		"no source":          {`{"nbformat": 4, "cells": [{"cell_type": "code", "metadata": {}, "outputs": []}]}`, "cell 0: no source"},
		"source a number":    {`{"nbformat": 4, "cells": [{"cell_type": "code", "source": 1}]}`, "source must be a string or a list of strings"},
		"source mixed list":  {`{"nbformat": 4, "cells": [{"cell_type": "code", "source": ["a", 1]}]}`, "source must be"},
		"outputs not a list": {`{"nbformat": 4, "cells": [{"cell_type": "code", "source": "", "outputs": {}}]}`, "outputs"},
		"bad count":          {`{"nbformat": 4, "cells": [{"cell_type": "code", "source": "", "execution_count": "x"}]}`, "execution_count"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := notebook.Parse([]byte(tc.in))
			require.ErrorIs(t, err, notebook.ErrInvalid)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestParseTooLarge(t *testing.T) {
	t.Parallel()
	// A valid notebook just over the cap: one markdown cell holding the padding.
	head, tail := `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "markdown", "metadata": {}, "source": "`, `"}]}`
	pad := notebook.MaxSize + 1 - len(head) - len(tail)
	big := head + strings.Repeat("x", pad) + tail
	_, err := notebook.Parse([]byte(big))
	require.ErrorIs(t, err, notebook.ErrTooLarge)
	_, err = notebook.Read(strings.NewReader(big))
	require.ErrorIs(t, err, notebook.ErrTooLarge)

	// At the cap exactly it is accepted.
	atCap := head + strings.Repeat("x", pad-1) + tail
	nb, err := notebook.Read(strings.NewReader(atCap))
	require.NoError(t, err)
	require.Len(t, nb.Cells[0].Source, pad-1)
}

func TestParseSourceForms(t *testing.T) {
	t.Parallel()
	in := `{"nbformat": 4, "nbformat_minor": 4, "metadata": {},
	 "cells": [
	  {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null, "source": "a = 1\nb = 2"},
	  {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null, "source": ["a = 1\n", "b = 2"]},
	  {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null, "source": []}
	 ]}`
	nb, err := notebook.Parse([]byte(in))
	require.NoError(t, err)
	require.Equal(t, "a = 1\nb = 2", nb.Cells[0].Source)
	require.Equal(t, "a = 1\nb = 2", nb.Cells[1].Source)
	require.Equal(t, "", nb.Cells[2].Source)

	// Unchanged sources keep their form; a changed one is written as lines.
	nb.Cells[2].Source = "c = 3\nd = 4\n"
	out, err := nb.Encode()
	require.NoError(t, err)
	var back struct {
		Cells []struct {
			Source json.RawMessage `json:"source"`
		} `json:"cells"`
	}
	require.NoError(t, json.Unmarshal(out, &back))
	require.JSONEq(t, `"a = 1\nb = 2"`, string(back.Cells[0].Source))
	require.JSONEq(t, `["a = 1\n", "b = 2"]`, string(back.Cells[1].Source))
	require.JSONEq(t, `["c = 3\n", "d = 4\n"]`, string(back.Cells[2].Source))
}

func TestParseKeepsUnknownFields(t *testing.T) {
	t.Parallel()
	in := `{"nbformat": 4, "nbformat_minor": 5, "x-top": {"k": [1, 2.50, "<b>"]},
	 "metadata": {"kernelspec": {"name": "python3"}, "x-meta": null},
	 "cells": [
	  {"cell_type": "markdown", "id": "md", "metadata": {"x-cell": 1}, "source": "hi", "attachments": {"a.png": {"image/png": "AAAA"}}},
	  {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null, "source": "1"}
	 ]}`
	nb, err := notebook.Parse([]byte(in))
	require.NoError(t, err)
	require.Equal(t, "md", nb.Cells[0].ID)
	require.Regexp(t, `^[0-9a-f]{8}$`, nb.Cells[1].ID, "4.5 cells without an id get one")
	out, err := nb.Encode()
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, map[string]any{"k": []any{1.0, 2.5, "<b>"}}, got["x-top"])
	require.Equal(t, map[string]any{"kernelspec": map[string]any{"name": "python3"}, "x-meta": nil}, got["metadata"])
	cell := got["cells"].([]any)[0].(map[string]any)
	require.Equal(t, map[string]any{"a.png": map[string]any{"image/png": "AAAA"}}, cell["attachments"])
	require.Equal(t, map[string]any{"x-cell": 1.0}, cell["metadata"])
	require.NotContains(t, cell, "outputs", "markdown cells have no outputs")
	require.True(t, bytes.Contains(out, []byte(`2.50`)), "numbers are kept as written")
}

func TestRunRefusesOtherLanguages(t *testing.T) {
	t.Parallel()
	for meta, lang := range map[string]string{
		`{"kernelspec": {"name": "ir", "language": "R", "display_name": "R"}}`: "R",
		`{"language_info": {"name": "julia"}}`:                                 "julia",
		`{"kernelspec": {"name": "python3", "language": "python"}}`:            "python",
		`{}`: "",
	} {
		nb, err := notebook.Parse([]byte(`{"nbformat": 4, "nbformat_minor": 4, "metadata": ` + meta + `, "cells": []}`))
		require.NoError(t, err)
		require.Equal(t, lang, nb.Language())
		if lang == "python" || lang == "" {
			continue
		}
		// Refused before the executor is used (it is nil here).
		rep, err := notebook.Run(context.Background(), nil, nb, notebook.RunOptions{})
		require.ErrorIs(t, err, notebook.ErrInvalid)
		require.Nil(t, rep)
		require.Contains(t, err.Error(), "Python kernels only")
	}
}

// TestDecodeStreams: Decode reads a notebook out of a larger document, stops at
// the cell limit, takes its fields in any order, and passes its reader's errors on.
func TestDecodeStreams(t *testing.T) {
	t.Parallel()
	cell := `{"cell_type": "markdown", "metadata": {}, "source": "x"}`
	cells := `[` + cell + `,` + cell + `,` + cell + `]`

	// cells before nbformat and nbformat_minor, as sorted keys have it; 4.5
	// gives the cells ids.
	dec := json.NewDecoder(strings.NewReader(`{"notebook": {"cells": ` + cells + `, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, "after": 1}`))
	_, err := dec.Token()
	require.NoError(t, err)
	_, err = dec.Token()
	require.NoError(t, err)
	nb, err := notebook.Decode(dec, 3)
	require.NoError(t, err)
	require.Len(t, nb.Cells, 3)
	require.Equal(t, 5, nb.FormatMinor)
	require.NotEmpty(t, nb.Cells[0].ID)
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, "after", tok, "the decoder is left after the notebook")

	_, err = notebook.Decode(json.NewDecoder(strings.NewReader(`{"nbformat": 4, "cells": `+cells+`}`)), 2)
	require.ErrorIs(t, err, notebook.ErrTooManyCells)
	require.Contains(t, err.Error(), "more than 2 cells")

	// A notebook of another version is refused before its cells are read.
	_, err = notebook.Decode(json.NewDecoder(strings.NewReader(`{"nbformat": 3, "cells": [1, 2`)), 0)
	require.ErrorIs(t, err, notebook.ErrInvalid)
	require.Contains(t, err.Error(), "nbformat 3 is not supported")

	cut := errors.New("connection cut")
	_, err = notebook.Decode(json.NewDecoder(io.MultiReader(strings.NewReader(`{"nbformat": 4, "cells": [`+cell), iotest.ErrReader(cut))), 0)
	require.ErrorIs(t, err, cut)
	require.NotErrorIs(t, err, notebook.ErrInvalid)
}

// TestWriteJSONIsMarshalJSON: the streamed form is the same bytes, HTML and
// U+2028 unescaped as before.
func TestWriteJSONIsMarshalJSON(t *testing.T) {
	t.Parallel()
	nb, err := notebook.Parse([]byte(`{"nbformat": 4, "nbformat_minor": 4, "metadata": {"z": "<b>"}, "a": "\u003c&\u2028", "cells": [
	  {"cell_type": "code", "metadata": {}, "execution_count": 1, "source": "print('<x>')",
	   "outputs": [{"output_type": "display_data", "metadata": {}, "data": {"text/html": "<p>a\nb</p>", "image/png": "AAAA"}}]},
	  {"cell_type": "raw", "metadata": {}, "source": ["a\u2029", "b"], "outputs": "kept"}]}`))
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, nb.WriteJSON(&buf))
	b, err := nb.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, string(b), buf.String())
	require.Contains(t, buf.String(), `"a":"<&`+"\u2028"+`"`)
	require.Contains(t, buf.String(), `"text/html":["<p>a\n","b</p>"]`)
	require.Contains(t, buf.String(), `"outputs":"kept"`)
	require.NotContains(t, buf.String(), `\u`)
}
