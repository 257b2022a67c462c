package mcpserver

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/kernelbox/kernelbox/api"
)

// errorText is the error section: the traceback when there is one (it ends with
// the exception), else "Ename: evalue".
func errorText(e *api.ErrorInfo) string {
	switch {
	case e == nil:
		return ""
	case len(e.Traceback) > 0:
		return strings.Join(e.Traceback, "\n")
	default:
		return joinNonEmpty(": ", e.Ename, e.Evalue)
	}
}

// clipError copies e with its traceback clipped to n bytes and its value to a
// reasonable length.
func clipError(e *api.ErrorInfo, n int) *api.ErrorInfo {
	if e == nil {
		return nil
	}
	c := *e
	c.Evalue, _ = clipMiddle(e.Evalue, max(n, 2000))
	c.Traceback = clipLines(e.Traceback, n)
	return &c
}

// clipLines clips the joined lines to n bytes and splits them again.
func clipLines(lines []string, n int) []string {
	joined := strings.Join(lines, "\n")
	if len(joined) <= n {
		return lines
	}
	clipped, _ := clipMiddle(joined, n)
	return strings.Split(clipped, "\n")
}

// clipJSONText clips an nbformat multiline string to n bytes, re-encoded as a
// JSON string.
func clipJSONText(raw json.RawMessage, n int) json.RawMessage {
	text, err := api.MultilineString(raw)
	if err != nil || len(text) <= n {
		return raw
	}
	clipped, _ := clipMiddle(text, n)
	b, err := json.Marshal(clipped)
	if err != nil {
		return raw
	}
	return b
}

// clipMiddle returns s cut to about n bytes by dropping its middle, which is
// replaced by a marker saying how much was dropped, and the number of bytes dropped.
// It keeps two fifths of the budget from the head and the rest from the tail (where
// the conclusion or the exception usually is), cuts at line ends when one is near
// and never splits a UTF-8 sequence.
func clipMiddle(s string, n int) (string, int) {
	if len(s) <= n {
		return s, 0
	}
	n = max(n, 0)
	headN := n * 2 / 5
	tailN := n - headN
	h := runeStart(s, headN)
	if i := strings.LastIndexByte(s[:h], '\n'); i >= 0 && h-i < headN/5+1 {
		h = i + 1
	}
	t := len(s) - tailN
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	if i := strings.IndexByte(s[t:], '\n'); i >= 0 && i < tailN/5+1 && t+i+1 < len(s) {
		t += i + 1
	}
	if t < h {
		t = h
	}
	dropped := t - h
	marker := fmt.Sprintf("[... %s bytes dropped here ...]\n", count(dropped))
	if h > 0 && s[h-1] != '\n' {
		marker = "\n" + marker
	}
	return s[:h] + marker + s[t:], dropped
}

// runeStart moves i back to the start of the UTF-8 sequence it falls in.
func runeStart(s string, i int) int {
	i = min(max(i, 0), len(s))
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}
