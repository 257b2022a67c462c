package jupyter

import (
	"unicode/utf8"
)

// Stream messages carry nearly all of a chatty cell's output, and encoding/json
// decodes their text in three passes (validation, scanning, unquoting): for a cell
// printing 10 MiB that was a third of kernelbox's CPU time. decodeStream decodes the
// usual shape of their content, {"name": "...", "text": "..."}, in one pass. It
// gives up (ok false) on anything it does not handle exactly as encoding/json does
// (other keys, keys in other cases, non-string values, invalid UTF-8, control
// characters, surrogate escapes, trailing data), and the caller then uses
// encoding/json. FuzzDecodeStream checks that whatever it accepts, encoding/json
// decodes to the same result.
func decodeStream(b []byte) (s streamFields, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return s, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return s, skipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return s, false
		}
		key, n, ok := unquote(b[i+1:])
		if !ok {
			return s, false
		}
		i = skipSpace(b, i+1+n)
		if i >= len(b) || b[i] != ':' {
			return s, false
		}
		i = skipSpace(b, i+1)
		if i >= len(b) || b[i] != '"' {
			return s, false
		}
		val, n, ok := unquote(b[i+1:])
		if !ok {
			return s, false
		}
		switch key {
		case "name":
			s.Name, s.hasName = val, true
		case "text":
			s.Text, s.hasText = val, true
		default:
			return s, false
		}
		i = skipSpace(b, i+1+n)
		if i >= len(b) {
			return s, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return s, skipSpace(b, i+1) == len(b)
		default:
			return s, false
		}
	}
}

// escaped returns the byte a one-character JSON escape (\n, \", ...) stands for.
func escaped(c byte) (byte, bool) {
	switch c {
	case '"', '\\', '/':
		return c, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

// streamFields is stream content with which of its keys were present.
type streamFields struct {
	StreamContent
	hasName, hasText bool
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// unquote decodes a JSON string whose opening quote precedes b. It returns the
// string and how many bytes of b it used (through the closing quote).
func unquote(b []byte) (_ string, used int, ok bool) {
	var out []byte // nil until the first escape: most strings are copied once
	start := 0
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\':
			i++
		case c == '"':
			if out == nil {
				return string(b[:i]), i + 1, true
			}
			return string(append(out, b[start:i]...)), i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return "", 0, false
			}
			if out == nil {
				out = make([]byte, 0, len(b))
			}
			out = append(out, b[start:i]...)
			if c, ok := escaped(b[i+1]); ok {
				out = append(out, c)
				i += 2
				start = i
				continue
			}
			if b[i+1] != 'u' {
				return "", 0, false
			}
			r, ok := hex4(b[i:])
			if !ok || r >= 0xD800 && r < 0xE000 {
				return "", 0, false // surrogates: encoding/json's rules apply
			}
			out = utf8.AppendRune(out, r)
			i += 6
			start = i
		case c < 0x20:
			return "", 0, false
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return "", 0, false // invalid UTF-8: encoding/json substitutes U+FFFD
			}
			i += size
		}
	}
	return "", 0, false
}
