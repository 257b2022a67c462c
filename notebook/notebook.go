package notebook

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/google/uuid"

	"github.com/kernelbox/kernelbox/api"
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

	// ErrTooManyCells: the notebook has more cells than Decode was allowed.
	ErrTooManyCells = errors.New("notebook has too many cells")
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
	Outputs []api.Output

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

// KernelName returns the name in the notebook's metadata.kernelspec ("python3" for
// nearly every notebook written elsewhere), or "".
func (nb *Notebook) KernelName() string {
	var meta struct {
		Name string `json:"name"`
	}
	if raw, ok := nb.Metadata["kernelspec"]; ok && json.Unmarshal(raw, &meta) == nil {
		return meta.Name
	}
	return ""
}

// hasCellIDs reports whether the notebook's format requires cell ids (4.5+).
func (nb *Notebook) hasCellIDs() bool { return nb.FormatMinor >= 5 }

// newCellID returns a random cell id of the form nbformat generates.
func newCellID() string { return strings.ReplaceAll(uuid.NewString(), "-", "")[:8] }
