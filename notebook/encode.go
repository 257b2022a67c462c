package notebook

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
)

// Writing a notebook back: WriteJSON streams it one cell at a time, Encode lays
// it out the way nbformat writes files (format.go has the line splitting).

// MarshalJSON writes the notebook as compact nbformat JSON.
func (nb *Notebook) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	if err := nb.WriteJSON(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteJSON writes the notebook to w as MarshalJSON does, one cell at a time, so
// that only one cell's JSON is held in memory beside the notebook.
func (nb *Notebook) WriteJSON(w io.Writer) error {
	keys := make([]string, 0, len(nb.extra)+4)
	for k := range nb.extra {
		switch k {
		case "cells", "metadata", "nbformat", "nbformat_minor":
		default:
			keys = append(keys, k)
		}
	}
	keys = append(keys, "cells", "metadata", "nbformat", "nbformat_minor")
	slices.Sort(keys)
	ew := newErrWriter(w)
	ew.write([]byte{'{'})
	for i, k := range keys {
		if i > 0 {
			ew.write([]byte{','})
		}
		ew.marshal(k)
		ew.write([]byte{':'})
		switch k {
		case "cells":
			ew.write([]byte{'['})
			for j, c := range nb.Cells {
				if j > 0 {
					ew.write([]byte{','})
				}
				ew.cell(c)
			}
			ew.write([]byte{']'})
		case "metadata":
			ew.marshal(nonNil(nb.Metadata))
		case "nbformat":
			ew.marshal(nb.Format)
		case "nbformat_minor":
			ew.marshal(nb.FormatMinor)
		default:
			ew.marshal(nb.extra[k])
		}
	}
	ew.write([]byte{'}'})
	return ew.err
}

// errWriter writes JSON values until the first error, which it keeps. Values are
// encoded straight to w without HTML escaping, each in one Write (see
// valueWriter), instead of json.Marshal's copy and unescapeHTML's second one.
type errWriter struct {
	w   io.Writer
	vw  valueWriter
	enc *json.Encoder
	err error
}

func newErrWriter(w io.Writer) *errWriter {
	ew := &errWriter{w: w, vw: valueWriter{w: w}}
	ew.enc = json.NewEncoder(&ew.vw)
	ew.enc.SetEscapeHTML(false)
	return ew
}

func (ew *errWriter) write(b []byte) {
	if ew.err == nil {
		_, ew.err = ew.w.Write(b)
	}
}

func (ew *errWriter) marshal(v any) {
	if ew.err == nil {
		ew.err = ew.enc.Encode(v)
	}
}

// cell writes c as MarshalJSON does.
func (ew *errWriter) cell(c *Cell) { ew.marshal(c.fields()) }

// valueWriter takes the single Write of each json.Encoder.Encode: it drops the
// newline Encode ends a value with and unescapes what the encoder escapes even
// without HTML escaping (U+2028, U+2029), and any \u003c-style escapes of the
// input, as unescapeHTML does for MarshalJSON. A Write holds a whole value, so
// no escape sequence is split between two.
type valueWriter struct{ w io.Writer }

func (vw *valueWriter) Write(b []byte) (int, error) {
	n := len(b)
	if _, err := vw.w.Write(unescapeHTML(bytes.TrimSuffix(b, []byte{'\n'}))); err != nil {
		return 0, err
	}
	return n, nil
}

// MarshalJSON writes the cell in nbformat form: a code cell always has
// execution_count and outputs, other cells never.
func (c *Cell) MarshalJSON() ([]byte, error) {
	return json.Marshal(c.fields())
}

// fields are the cell's nbformat fields, for encoding/json to write.
func (c *Cell) fields() map[string]any {
	m := make(map[string]any, len(c.extra)+6)
	for k, v := range c.extra {
		m[k] = v
	}
	m["cell_type"] = c.Type
	if c.ID != "" {
		m["id"] = c.ID
	}
	m["metadata"] = nonNil(c.Metadata)
	if c.rawSource != nil && c.Source == c.readSource {
		m["source"] = c.rawSource
	} else {
		m["source"] = splitLines(c.Source)
	}
	if c.Type == "code" {
		outs := make([]any, len(c.Outputs))
		for i, o := range c.Outputs {
			outs[i] = outputJSON(o)
		}
		m["execution_count"] = c.ExecutionCount
		m["outputs"] = outs
	}
	return m
}

// Encode returns the notebook as a file, in the layout nbformat writes: keys sorted,
// one-space indent, non-ASCII and HTML characters unescaped, a final newline.
func (nb *Notebook) Encode() ([]byte, error) {
	b, err := nb.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(len(b) + len(b)/4)
	if err := json.Indent(&buf, b, "", " "); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

func nonNil(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return map[string]json.RawMessage{}
	}
	return m
}
