package notebook

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/kernelbox/kernelbox/api"
)

// This file writes JSON the way nbformat does, so that a notebook written back
// differs from one written by Jupyter only where its content differs: multiline
// strings as lists of lines (str.splitlines(keepends=True)), keys sorted, and no
// escaping of HTML characters.

// outputJSON is an output in nbformat's on-disk form: stream text and the text-like
// entries of a mime bundle split into lines.
func outputJSON(o api.Output) any {
	switch o.OutputType {
	case "stream":
		return struct {
			Name       string   `json:"name"`
			OutputType string   `json:"output_type"`
			Text       []string `json:"text"`
		}{o.Name, o.OutputType, splitLines(o.Text)}
	case "error":
		tb := o.Traceback
		if tb == nil {
			tb = []string{}
		}
		return struct {
			Ename      string   `json:"ename"`
			Evalue     string   `json:"evalue"`
			OutputType string   `json:"output_type"`
			Traceback  []string `json:"traceback"`
		}{o.Ename, o.Evalue, o.OutputType, tb}
	case "execute_result":
		return struct {
			Data           map[string]json.RawMessage `json:"data"`
			ExecutionCount *int                       `json:"execution_count"`
			Metadata       map[string]json.RawMessage `json:"metadata"`
			OutputType     string                     `json:"output_type"`
		}{splitBundle(o.Data), o.ExecutionCount, nonNil(o.Metadata), o.OutputType}
	default:
		return struct {
			Data       map[string]json.RawMessage `json:"data"`
			Metadata   map[string]json.RawMessage `json:"metadata"`
			OutputType string                     `json:"output_type"`
		}{splitBundle(o.Data), nonNil(o.Metadata), o.OutputType}
	}
}

// splitBundle splits the string values of text/* types, JavaScript and SVG into
// lines, as nbformat does; other values (JSON, base64 images) stay as they are.
func splitBundle(data map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(data))
	for mime, raw := range data {
		out[mime] = raw
		if !strings.HasPrefix(mime, "text/") && mime != "application/javascript" && mime != "image/svg+xml" {
			continue
		}
		var s string
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			continue
		}
		// Unescaped, so that writing the notebook need not unescape it.
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(splitLines(s)); err == nil {
			out[mime] = bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
		}
	}
	return out
}

// splitLines splits s after each line boundary, as Python's
// str.splitlines(keepends=True) does: \n, \r, \r\n, \v, \f, \x1c-\x1e, \x85,
// U+2028 and U+2029.
func splitLines(s string) []string {
	lines := []string{}
	start := 0
	for i, r := range s {
		end := -1
		switch r {
		case '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				continue // the line ends after the \n
			}
			end = i + 1
		case '\n', '\v', '\f', '\x1c', '\x1d', '\x1e':
			end = i + 1
		case '\u0085':
			end = i + 2
		case '\u2028', '\u2029':
			end = i + 3
		}
		if end > 0 {
			lines = append(lines, s[start:end])
			start = end
		}
	}
	if start < len(s) {
		lines = append(lines, s[start:])
	}
	return lines
}

// unescapeHTML undoes encoding/json's escaping of <, >, & and U+2028/U+2029 in
// valid JSON, so that HTML outputs stay readable in the file. It copies every other
// escape sequence unchanged.
func unescapeHTML(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			if r, ok := unescaped[string(b[i+2:i+6])]; ok {
				out = append(out, r...)
				i += 5
				continue
			}
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}

var unescaped = map[string]string{"003c": "<", "003e": ">", "0026": "&", "2028": "\u2028", "2029": "\u2029"}
