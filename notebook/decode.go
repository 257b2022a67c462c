package notebook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/kernelbox/kernelbox/api"
)

// Reading a notebook: Read and Parse take a whole file, Decode reads one cell at a
// time from a JSON stream; what the package does not model is kept as raw JSON.

// Read reads and parses a notebook of at most MaxSize bytes.
func Read(r io.Reader) (*Notebook, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read notebook: %w", err)
	}
	return Parse(b)
}

// Parse parses an nbformat v4 notebook. Cell sources and output texts may be strings
// or lists of strings. In a notebook of nbformat 4.5 or later, cells without an id
// get a fresh one, as nbformat does, so that the notebook written back is valid.
func Parse(b []byte) (*Notebook, error) {
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%w: over %d bytes", ErrTooLarge, MaxSize)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	nb, err := Decode(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalidf("not a JSON object: data after the notebook")
	}
	return nb, nil
}

// Decode reads one notebook, as Parse does, from the next JSON value of dec, and
// leaves dec after it, so that a notebook can be read from inside a larger
// document. Cells are decoded one at a time: the input is never held whole, and
// with maxCells > 0 a notebook of more cells is refused with ErrTooManyCells as
// soon as that many have been read. Errors of dec's reader are returned wrapped.
func Decode(dec *json.Decoder, maxCells int) (*Notebook, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxErr(err)
	}
	if tok != json.Delim('{') {
		return nil, invalidf("not a JSON object: %s", describe(tok))
	}
	top := map[string]json.RawMessage{}
	nb := &Notebook{extra: top}
	cells, formatRead := false, false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxErr(err)
		}
		key := tok.(string)
		if key != "cells" {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, syntaxErr(err)
			}
			top[key] = raw
			continue
		}
		if cells {
			return nil, invalidf("cells: given twice")
		}
		// A notebook of another version is refused before its cells are read.
		if _, ok := top["nbformat"]; ok {
			if err := nb.format(); err != nil {
				return nil, err
			}
			formatRead = true
		}
		if cells, err = nb.decodeCells(dec, maxCells); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, syntaxErr(err)
	}
	if !formatRead {
		if err := nb.format(); err != nil {
			return nil, err
		}
	}
	if raw, ok := take(top, "nbformat_minor"); ok {
		if err := json.Unmarshal(raw, &nb.FormatMinor); err != nil {
			return nil, invalidf("nbformat_minor: %v", err)
		}
	}
	if raw, ok := take(top, "metadata"); ok {
		if err := json.Unmarshal(raw, &nb.Metadata); err != nil {
			return nil, invalidf("metadata: %v", err)
		}
	}
	if !cells {
		return nil, invalidf("no cells")
	}
	if nb.hasCellIDs() {
		for _, c := range nb.Cells {
			if c.ID == "" {
				c.ID = newCellID()
			}
		}
	}
	return nb, nil
}

// format reads nbformat out of the top-level fields and checks it is 4.
func (nb *Notebook) format() error {
	rawFormat, ok := take(nb.extra, "nbformat")
	if !ok {
		return invalidf("no nbformat version: not a Jupyter notebook")
	}
	if err := json.Unmarshal(rawFormat, &nb.Format); err != nil {
		return invalidf("nbformat: %v", err)
	}
	if nb.Format != 4 {
		return invalidf("nbformat %d is not supported, only 4 (convert it with `jupyter nbconvert --to notebook --nbformat 4`)", nb.Format)
	}
	return nil
}

// decodeCells reads the value of "cells" from dec, a list of cells (or null,
// which counts as absent, as take has it). It reports whether there was a list.
func (nb *Notebook) decodeCells(dec *json.Decoder, maxCells int) (bool, error) {
	tok, err := dec.Token()
	if err != nil {
		return false, syntaxErr(err)
	}
	if tok == nil {
		return false, nil
	}
	if tok != json.Delim('[') {
		if d, ok := tok.(json.Delim); ok && d == '{' {
			return false, invalidf("cells: not a list but an object")
		}
		return false, invalidf("cells: not a list but %s", describe(tok))
	}
	nb.Cells = []*Cell{}
	for i := 0; dec.More(); i++ {
		if maxCells > 0 && i == maxCells {
			return false, fmt.Errorf("%w: more than %d cells", ErrTooManyCells, maxCells)
		}
		var cd cellDecoder
		if err := dec.Decode(&cd); err != nil {
			var ute *json.UnmarshalTypeError
			var ce *cellError
			switch {
			case errors.As(err, &ute):
				return false, invalidf("cell %d: not an object", i)
			case errors.As(err, &ce):
				return false, invalidf("cell %d: %v", i, ce.err)
			}
			return false, syntaxErr(err)
		}
		nb.Cells = append(nb.Cells, cd.c)
	}
	if _, err := dec.Token(); err != nil {
		return false, syntaxErr(err)
	}
	return true, nil
}

// syntaxErr says what is wrong with input dec could not read: bad JSON is an
// invalid notebook; an error of the reader underneath (a size limit, a dropped
// connection) is returned as it is, wrapped.
func syntaxErr(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%w: not a JSON object: %w", ErrInvalid, err)
	}
	return fmt.Errorf("read notebook: %w", err)
}

// describe names the kind of a JSON token for an error message.
func describe(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		return "a list"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// cellDecoder parses one cell straight from a json.Decoder's buffer: the
// fields it keeps as raw JSON are copied out of it, but the outputs, which are
// decoded at once, are not, which spares a copy of the largest part of a
// notebook.
type cellDecoder struct{ c *Cell }

// cellError is a malformed cell, as told by parseCellMap.
type cellError struct{ err error }

func (e *cellError) Error() string { return e.err.Error() }

// borrowed is raw JSON that still points into the input, valid only while
// UnmarshalJSON runs.
type borrowed []byte

func (r *borrowed) UnmarshalJSON(b []byte) error { *r = b; return nil }

func (cd *cellDecoder) UnmarshalJSON(b []byte) error {
	var refs map[string]borrowed
	if err := json.Unmarshal(b, &refs); err != nil {
		return err
	}
	m := make(map[string]json.RawMessage, len(refs))
	for k, v := range refs {
		if k == "outputs" {
			m[k] = json.RawMessage(v)
		} else {
			m[k] = bytes.Clone(v)
		}
	}
	c, err := parseCellMap(m)
	if err != nil {
		return &cellError{err}
	}
	if raw, ok := c.extra["outputs"]; ok { // not a code cell: kept as it was
		c.extra["outputs"] = bytes.Clone(raw)
	}
	cd.c = c
	return nil
}

func parseCellMap(m map[string]json.RawMessage) (*Cell, error) {
	c := &Cell{extra: m}
	raw, ok := take(m, "cell_type")
	if !ok {
		return nil, errors.New("no cell_type")
	}
	if err := json.Unmarshal(raw, &c.Type); err != nil {
		return nil, fmt.Errorf("cell_type: %v", err)
	}
	switch c.Type {
	case "code", "markdown", "raw":
	default:
		return nil, fmt.Errorf("unknown cell_type %q", c.Type)
	}
	if raw, ok := take(m, "id"); ok {
		if err := json.Unmarshal(raw, &c.ID); err != nil {
			return nil, fmt.Errorf("id: %v", err)
		}
	}
	raw, ok = take(m, "source")
	if !ok {
		return nil, errors.New("no source")
	}
	src, err := api.MultilineString(raw)
	if err != nil {
		return nil, errors.New("source must be a string or a list of strings")
	}
	c.Source, c.readSource, c.rawSource = src, src, raw
	if raw, ok := take(m, "metadata"); ok {
		if err := json.Unmarshal(raw, &c.Metadata); err != nil {
			return nil, fmt.Errorf("metadata: %v", err)
		}
	}
	if c.Type != "code" {
		return c, nil
	}
	if raw, ok := take(m, "execution_count"); ok {
		if err := json.Unmarshal(raw, &c.ExecutionCount); err != nil {
			return nil, fmt.Errorf("execution_count: %v", err)
		}
	}
	if raw, ok := take(m, "outputs"); ok {
		if err := json.Unmarshal(raw, &c.Outputs); err != nil {
			return nil, fmt.Errorf("outputs: %v", err)
		}
	}
	return c, nil
}

// take removes key from m and returns its value; JSON null counts as absent.
func take(m map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	raw, ok := m[key]
	delete(m, key)
	return raw, ok && string(raw) != "null"
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
