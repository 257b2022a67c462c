package notebook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kernelbox/kernelbox/api"
)

// ErrInvalidParameter: a parameter's name is not a Python identifier, its value is
// not JSON, or it is given twice.
var ErrInvalidParameter = errors.New("invalid parameter")

// The cell tags this package acts on, as papermill and nbclient name them.
const (
	TagParameters         = "parameters"
	TagInjectedParameters = "injected-parameters"
	TagSkipExecution      = "skip-execution"
	TagRaisesException    = "raises-exception"
)

// Parameter is one value to inject into a notebook.
type Parameter struct {
	// Name is a Python identifier that is not a keyword.
	Name string
	// Value is any JSON value; it is written as the equivalent Python literal
	// (true → True, null → None, objects → dicts in the same key order).
	Value json.RawMessage
}

// ParseAssignment parses a command-line parameter NAME=VALUE; see ParseValue for
// how VALUE is read.
func ParseAssignment(s string) (Parameter, error) {
	name, value, ok := strings.Cut(s, "=")
	if !ok {
		return Parameter{}, fmt.Errorf("%w: %q: want NAME=VALUE", ErrInvalidParameter, s)
	}
	if !ValidName(name) {
		return Parameter{}, badName(name)
	}
	return Parameter{Name: name, Value: ParseValue(value)}, nil
}

// ParseValue reads a command-line parameter value as JSON, the way papermill's -p
// does: true/True, false/False, null/None, numbers, and JSON strings, lists and
// objects are themselves; anything else is a string.
func ParseValue(s string) json.RawMessage {
	switch s {
	case "True", "true":
		return json.RawMessage("true")
	case "False", "false":
		return json.RawMessage("false")
	case "None", "null":
		return json.RawMessage("null")
	}
	if t := strings.TrimSpace(s); t != "" && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(s)
	return b
}

// ValidName reports whether name can be assigned in Python: an identifier that is
// not a keyword.
func ValidName(name string) bool {
	if name == "" || pythonKeywords[name] {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_' || unicode.IsLetter(r) || unicode.Is(unicode.Nl, r):
		case i > 0 && (unicode.IsDigit(r) || unicode.In(r, unicode.Mn, unicode.Mc, unicode.Nd, unicode.Pc)):
		default:
			return false
		}
	}
	return true
}

var pythonKeywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true,
	"async": true, "await": true, "break": true, "class": true, "continue": true,
	"def": true, "del": true, "elif": true, "else": true, "except": true, "finally": true,
	"for": true, "from": true, "global": true, "if": true, "import": true, "in": true,
	"is": true, "lambda": true, "nonlocal": true, "not": true, "or": true, "pass": true,
	"raise": true, "return": true, "try": true, "while": true, "with": true, "yield": true,
}

func badName(name string) error {
	return fmt.Errorf("%w: %q is not a Python identifier (letters, digits and _, not starting with a digit, not a keyword)", ErrInvalidParameter, name)
}

// InjectParameters adds a code cell tagged "injected-parameters" that assigns the
// parameters, the way papermill does: it replaces an earlier injected-parameters
// cell, else goes right after the first cell tagged "parameters", else at the top.
// It does nothing when params is empty.
func (nb *Notebook) InjectParameters(params []Parameter) error {
	if len(params) == 0 {
		return nil
	}
	var src strings.Builder
	src.WriteString("# Parameters\n")
	seen := map[string]bool{}
	for _, p := range params {
		if !ValidName(p.Name) {
			return badName(p.Name)
		}
		if seen[p.Name] {
			return fmt.Errorf("%w: %q is given twice", ErrInvalidParameter, p.Name)
		}
		seen[p.Name] = true
		lit, err := pythonLiteral(p.Value)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalidParameter, p.Name, err)
		}
		fmt.Fprintf(&src, "%s = %s\n", p.Name, lit)
	}
	cell := &Cell{
		Type:     "code",
		Source:   src.String(),
		Metadata: map[string]json.RawMessage{"tags": json.RawMessage(`["` + TagInjectedParameters + `"]`)},
		Outputs:  []api.Output{},
	}
	if nb.hasCellIDs() {
		cell.ID = newCellID()
	}
	if i := nb.firstTagged(TagInjectedParameters); i >= 0 {
		nb.Cells[i] = cell
		return nil
	}
	at := nb.firstTagged(TagParameters) + 1 // 0 when there is no parameters cell
	nb.Cells = append(nb.Cells[:at], append([]*Cell{cell}, nb.Cells[at:]...)...)
	return nil
}

func (nb *Notebook) firstTagged(tag string) int {
	for i, c := range nb.Cells {
		if c.HasTag(tag) {
			return i
		}
	}
	return -1
}

// pythonLiteral writes a JSON value as the Python literal that evaluates to the same
// value, keeping the key order of objects.
func pythonLiteral(raw json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	if err := writePython(&b, dec); err != nil {
		return "", fmt.Errorf("not a JSON value: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", errors.New("not a single JSON value")
	}
	return b.String(), nil
}

func writePython(b *strings.Builder, dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		open, end := "[", "]"
		if t == '{' {
			open, end = "{", "}"
		}
		b.WriteString(open)
		for n := 0; dec.More(); n++ {
			if n > 0 {
				b.WriteString(", ")
			}
			if t == '{' {
				key, err := dec.Token()
				if err != nil {
					return err
				}
				b.WriteString(pythonString(key.(string)))
				b.WriteString(": ")
			}
			if err := writePython(b, dec); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		b.WriteString(end)
	case string:
		b.WriteString(pythonString(t))
	case json.Number:
		// JSON's number syntax is a subset of Python's.
		b.WriteString(t.String())
	case bool:
		b.WriteString(map[bool]string{true: "True", false: "False"}[t])
	case nil:
		b.WriteString("None")
	}
	return nil
}

// pythonString quotes s as a Python string literal; characters that are not
// printable are escaped, so the literal stays on one line.
func pythonString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			switch {
			case r == utf8.RuneError || r == ' ' || unicode.IsPrint(r):
				b.WriteRune(r)
			case r < 0x100:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r < 0x10000:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
