package notebook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"
	"github.com/kernelbox/kernelbox/executor"
)

// MaxSize is the largest notebook Parse and Read accept, in bytes: 64 MiB.
const MaxSize = 64 << 20

// Errors callers branch on; test with errors.Is.
var (
	// ErrInvalid: the input is not an nbformat v4 notebook (not JSON, another
	// nbformat version, no cells, a malformed cell).
	ErrInvalid = errors.New("invalid notebook")

	// ErrTooLarge: the input is over MaxSize.
	ErrTooLarge = errors.New("notebook too large")
)

// Notebook is an nbformat v4 notebook. Fields this package does not model are kept
// as raw JSON and written back unchanged.
type Notebook struct {
	// Format and FormatMinor are nbformat and nbformat_minor. Format is always 4.
	Format      int
	FormatMinor int

	// Metadata is the notebook's metadata (kernelspec, language_info, ...).
	Metadata map[string]json.RawMessage

	Cells []*Cell

	extra map[string]json.RawMessage
}

// Cell is one notebook cell. Fields this package does not model (attachments, and
// anything unknown) are kept as raw JSON and written back unchanged.
type Cell struct {
	// ID is the cell id (nbformat 4.5 and later); empty when the notebook has none.
	ID string

	// Type is "code", "markdown" or "raw".
	Type string

	// Source is the cell's text. nbformat stores it as a string or a list of
	// lines; it is written back in the form it was read in unless it changed.
	Source string

	// Metadata is the cell's metadata (tags, ...).
	Metadata map[string]json.RawMessage

	// ExecutionCount is the prompt number of a code cell, nil when it has not run.
	ExecutionCount *int

	// Outputs are a code cell's outputs.
	Outputs []executor.Output

	extra      map[string]json.RawMessage
	rawSource  json.RawMessage // source as read, written back while Source is unchanged
	readSource string
}

// Tags returns the cell's metadata.tags.
func (c *Cell) Tags() []string {
	var tags []string
	if raw, ok := c.Metadata["tags"]; ok {
		_ = json.Unmarshal(raw, &tags)
	}
	return tags
}

// HasTag reports whether the cell is tagged tag.
func (c *Cell) HasTag(tag string) bool {
	for _, t := range c.Tags() {
		if t == tag {
			return true
		}
	}
	return false
}

// Language returns the notebook's programming language, from metadata.kernelspec or
// metadata.language_info, or "" when the metadata does not say.
func (nb *Notebook) Language() string {
	var meta struct {
		Language string `json:"language"` // kernelspec
		Name     string `json:"name"`     // language_info
	}
	if raw, ok := nb.Metadata["kernelspec"]; ok && json.Unmarshal(raw, &meta) == nil && meta.Language != "" {
		return meta.Language
	}
	meta.Name = ""
	if raw, ok := nb.Metadata["language_info"]; ok && json.Unmarshal(raw, &meta) == nil {
		return meta.Name
	}
	return ""
}

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
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, invalidf("not a JSON object: %v", err)
	}
	nb := &Notebook{extra: top}
	rawFormat, ok := take(top, "nbformat")
	if !ok {
		return nil, invalidf("no nbformat version: not a Jupyter notebook")
	}
	if err := json.Unmarshal(rawFormat, &nb.Format); err != nil {
		return nil, invalidf("nbformat: %v", err)
	}
	if nb.Format != 4 {
		return nil, invalidf("nbformat %d is not supported, only 4 (convert it with `jupyter nbconvert --to notebook --nbformat 4`)", nb.Format)
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
	rawCells, ok := take(top, "cells")
	if !ok {
		return nil, invalidf("no cells")
	}
	var cells []json.RawMessage
	if err := json.Unmarshal(rawCells, &cells); err != nil {
		return nil, invalidf("cells: %v", err)
	}
	nb.Cells = make([]*Cell, 0, len(cells))
	for i, raw := range cells {
		c, err := parseCell(raw)
		if err != nil {
			return nil, invalidf("cell %d: %v", i, err)
		}
		if c.ID == "" && nb.hasCellIDs() {
			c.ID = newCellID()
		}
		nb.Cells = append(nb.Cells, c)
	}
	return nb, nil
}

func parseCell(b []byte) (*Cell, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
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
	src, err := executor.MultilineString(raw)
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

// hasCellIDs reports whether the notebook's format requires cell ids (4.5+).
func (nb *Notebook) hasCellIDs() bool { return nb.FormatMinor >= 5 }

// newCellID returns a random cell id of the form nbformat generates.
func newCellID() string { return strings.ReplaceAll(uuid.NewString(), "-", "")[:8] }

// MarshalJSON writes the notebook as compact nbformat JSON.
func (nb *Notebook) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(nb.extra)+4)
	for k, v := range nb.extra {
		m[k] = v
	}
	cells := nb.Cells
	if cells == nil {
		cells = []*Cell{}
	}
	m["cells"] = cells
	m["metadata"] = nonNil(nb.Metadata)
	m["nbformat"] = nb.Format
	m["nbformat_minor"] = nb.FormatMinor
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return unescapeHTML(b), nil
}

// MarshalJSON writes the cell in nbformat form: a code cell always has
// execution_count and outputs, other cells never.
func (c *Cell) MarshalJSON() ([]byte, error) {
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
	return json.Marshal(m)
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
