package jupyter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A frame larger than a connection's MaxMessageBytes is not held in memory: the reader
// keeps its first MaxMessageBytes and discards the rest. The functions here recover
// what they can from that prefix: the headers (which the server writes first), and for
// a stream message the start of its text, so that a cell printing gigabytes yields an
// honest "truncated" result instead of a dropped connection or an exhausted heap.

// salvageV1 recovers a message from the prefix of a v1 frame.
func salvageV1(prefix []byte, total int64) (*Message, error) {
	channel, parts, err := v1Parts(prefix, true)
	if err != nil {
		return nil, err
	}
	if len(parts) < 4 {
		return nil, fmt.Errorf("%w: oversized v1 frame cut inside its headers", errMalformed)
	}
	m := &Message{Channel: channel, Metadata: json.RawMessage("{}")}
	if err := json.Unmarshal(parts[0], &m.Header); err != nil {
		return nil, fmt.Errorf("%w: oversized frame header: %v", errMalformed, err)
	}
	if err := json.Unmarshal(parts[1], &m.ParentHeader); err != nil {
		return nil, fmt.Errorf("%w: oversized frame parent header: %v", errMalformed, err)
	}
	m.Content, m.DroppedBytes = salvageContent(m.Header.MsgType, parts[3], total)
	m.Truncated = true
	return m, nil
}

// salvageLegacy recovers a message from the prefix of a legacy JSON frame. Jupyter
// Server writes header, msg_id, msg_type, parent_header, metadata and then content;
// the channel comes last and is inferred from the message type.
func salvageLegacy(prefix []byte, total int64) (*Message, error) {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("%w: oversized frame is not a JSON object", errMalformed)
	}
	m := &Message{Metadata: json.RawMessage("{}")}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: oversized frame: %v", errMalformed, err)
		}
		key, _ := t.(string)
		switch key {
		case "header":
			err = dec.Decode(&m.Header)
		case "parent_header":
			err = dec.Decode(&m.ParentHeader)
		case "channel":
			err = dec.Decode(&m.Channel)
		case "content":
			rest := prefix[dec.InputOffset():]
			rest = bytes.TrimLeft(rest, " \t\r\n:")
			m.Content, m.DroppedBytes = salvageContent(m.Header.MsgType, rest, total)
			m.Truncated = true
			if m.Channel == "" {
				m.Channel = channelOf(m.Header.MsgType)
			}
			return m, nil
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: oversized frame field %q: %v", errMalformed, key, err)
		}
	}
	return nil, fmt.Errorf("%w: oversized frame without content", errMalformed)
}

// salvageContent returns the content to report for an oversized message and how many
// bytes of output were dropped. Only stream text is kept (its start); any other
// content is dropped whole.
func salvageContent(msgType string, prefix []byte, total int64) (json.RawMessage, int64) {
	if msgType != "stream" {
		return json.RawMessage("{}"), total
	}
	name, text := salvageStream(prefix)
	c, _ := json.Marshal(StreamContent{Name: name, Text: text})
	return c, total - int64(len(prefix))
}

// salvageStream reads {"name": ..., "text": "... from a content prefix that may be cut
// anywhere inside the text string.
func salvageStream(prefix []byte) (name, text string) {
	name = "stdout" // ipykernel writes name before text; this is only a fallback
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return name, ""
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return name, ""
		}
		key, _ := t.(string)
		if key == "text" {
			rest := bytes.TrimLeft(prefix[dec.InputOffset():], " \t\r\n:")
			if len(rest) == 0 || rest[0] != '"' {
				return name, ""
			}
			return name, unquotePrefix(rest[1:])
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return name, ""
		}
		if key == "name" {
			_ = json.Unmarshal(v, &name)
		}
	}
	return name, ""
}

// unquotePrefix decodes the body of a JSON string that may be cut anywhere, stopping
// at the closing quote or at the last complete character.
func unquotePrefix(b []byte) string {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			return string(out)
		case c != '\\':
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 && !utf8.FullRune(b[i:]) {
				return string(out) // a multi-byte character cut by the prefix
			}
			out = utf8.AppendRune(out, r) // invalid bytes become U+FFFD, as in encoding/json
			i += size
		case i+1 >= len(b):
			return string(out)
		default:
			if c, ok := escaped(b[i+1]); ok {
				out = append(out, c)
				i += 2
				continue
			}
			if b[i+1] != 'u' {
				return string(out)
			}
			r, n := unquoteU(b[i:])
			if n == 0 {
				return string(out)
			}
			out = utf8.AppendRune(out, r)
			i += n
		}
	}
	return string(out)
}

// unquoteU decodes \uXXXX at the start of b, and the low surrogate that follows a high
// one, returning the rune and the bytes consumed, or 0 bytes when b is cut too short
// to tell. Like encoding/json, it turns a surrogate that is not part of a pair into
// U+FFFD and goes on after it: Python writes lone surrogates (from surrogateescape'd
// bytes) as such escapes.
func unquoteU(b []byte) (rune, int) {
	r, ok := hex4(b)
	if !ok {
		return 0, 0
	}
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	if r >= 0xDC00 {
		return utf8.RuneError, 6 // a low surrogate cannot start a pair
	}
	rest := b[6:]
	if r2, ok := hex4(rest); ok {
		if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
			return d, 12
		}
		return utf8.RuneError, 6
	}
	if len(rest) < 6 && bytes.HasPrefix(rest, []byte(`\u`)[:min(len(rest), 2)]) {
		return 0, 0 // the pair may have been cut off
	}
	return utf8.RuneError, 6
}

// hex4 decodes a \uXXXX escape at the start of p.
func hex4(p []byte) (rune, bool) {
	if len(p) < 6 || p[0] != '\\' || p[1] != 'u' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p[2:6]), 16, 16)
	return rune(v), err == nil
}

// channelOf infers the channel of a message from its type.
func channelOf(msgType string) string {
	switch msgType {
	case "execute_reply", "kernel_info_reply", "complete_reply", "inspect_reply",
		"history_reply", "is_complete_reply", "comm_info_reply":
		return ChannelShell
	case "shutdown_reply", "interrupt_reply", "debug_reply":
		return ChannelControl
	case "input_request":
		return ChannelStdin
	default:
		return ChannelIOPub
	}
}
