package jupyter

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestUnquotePrefix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
	}{
		{``, ``},
		{`abc`, `abc`},
		{`abc"def`, `abc`},
		{`a\"b\\c\/d\n\t\r\b\f`, "a\"b\\c/d\n\t\r\b\f"},
		{`ab\`, `ab`},
		{`ab\u00`, `ab`},
		{`ab\u00e9`, `abé`},
		{`ab\u00e9"x`, `abé`},
		{"ab\xc3", `ab`},         // é cut after its first byte
		{"ab\xf0\x9f\x98", `ab`}, // 😀 cut before its last byte
		{`\ud83d\ude00!`, `😀!`},
		{`x\ud83d`, `x`},              // high surrogate, its pair cut off
		{`x\ud83d\ude`, `x`},          // its pair cut short
		{`x\ud83d\`, `x`},             // the pair may follow
		{`x\ud83dabc`, "x\ufffdabc"},  // a lone high surrogate, then text
		{`x\ud83d\u0041`, "x\ufffdA"}, // a high surrogate, then another escape
		{`x\ud83d\n`, "x\ufffd\n"},
		{`x\ude00abc`, "x\ufffdabc"}, // a lone low surrogate
		{"a\xffb", "a\ufffdb"},       // invalid UTF-8 becomes U+FFFD, as encoding/json does
		{`a\x`, `a`},                 // an invalid escape ends the text
		{`a\uzzzz`, `a`},
	} {
		require.Equal(t, tc.want, unquotePrefix([]byte(tc.in)), "unquotePrefix(%q)", tc.in)
	}
}

// FuzzUnquotePrefix checks that unquotePrefix never panics, always returns valid
// UTF-8, and, given any prefix of a valid JSON string body, returns a prefix of what
// encoding/json decodes from the whole string — for bodies as Go writes them, as
// Python's json.dumps writes them (\u escapes and surrogate pairs for non-ASCII), and
// as the fuzzer invents them (lone surrogates, invalid UTF-8).
func FuzzUnquotePrefix(f *testing.F) {
	for _, s := range []string{
		"", "héllo wörld", "😀 and 😀", `a"b\c/d` + "\n\t\r\b\f\x01", "\u2028<>&", "日本語テキスト",
		`\ud83d\ude00`, `\ud83d`, `\ude00abc`, `\ud83dabc`, `\ud83d\u0041`, `\ud83d\ud83d\ude00`,
		"\xff\xfe", `\u00e9\u20ac`, `\"\\\/`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 128 {
			return // every cut of every body is checked: keep each run fast
		}
		got := unquotePrefix([]byte(s)) // arbitrary input: must not panic
		if !utf8.ValidString(got) {
			t.Fatalf("unquotePrefix(%q) = %q: invalid UTF-8", s, got)
		}
		goBody, _ := json.Marshal(s)
		bodies := []string{
			string(goBody[1 : len(goBody)-1]),
			pythonEscape(string(goBody[1 : len(goBody)-1])),
			s,
		}
		for _, body := range bodies {
			var full string
			if json.Unmarshal([]byte(`"`+body+`"`), &full) != nil {
				continue // the fuzzer's own body is often not a valid JSON string
			}
			if got := unquotePrefix([]byte(body + `"`)); got != full {
				t.Fatalf("body %q: unquotePrefix = %q, want %q", body, got, full)
			}
			for k := 0; k <= len(body); k++ {
				got := unquotePrefix([]byte(body[:k]))
				if !strings.HasPrefix(full, got) {
					t.Fatalf("body %q cut at %d: %q is not a prefix of %q", body, k, got, full)
				}
				if !utf8.ValidString(got) {
					t.Fatalf("body %q cut at %d: %q is not valid UTF-8", body, k, got)
				}
			}
		}
	})
}

// pythonEscape rewrites the non-ASCII characters of a JSON string body as \u escapes,
// as Python's json.dumps(ensure_ascii=True) writes them.
func pythonEscape(body string) string {
	var b strings.Builder
	for _, r := range body {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// legacyFrame writes a stream message the way Jupyter Server's legacy handler does:
// json.dumps of the message dict, the channel last.
func legacyFrame(text string) []byte {
	content, _ := json.Marshal(StreamContent{Name: "stderr", Text: text})
	return []byte(`{"header": {"msg_id": "m1", "msg_type": "stream", "session": "k"}, "msg_id": "m1", ` +
		`"msg_type": "stream", "parent_header": {"msg_id": "p1"}, "metadata": {"a": [1, {"b": "}"}]}, ` +
		`"content": ` + string(content) + `, "buffers": [], "channel": "iopub"}`)
}

func TestSalvageLegacy(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("abcdefghij", 100)
	frame := legacyFrame(text)
	start := strings.Index(string(frame), `"content"`)
	for cut := start + 40; cut < len(frame)-60; cut += 37 {
		m, err := salvageLegacy(frame[:cut], int64(len(frame)))
		require.NoError(t, err)
		require.True(t, m.Truncated)
		require.Equal(t, ChannelIOPub, m.Channel, "inferred from the message type")
		require.Equal(t, "stream", m.Type())
		require.Equal(t, "p1", m.ParentID())
		var st StreamContent
		require.NoError(t, m.DecodeContent(&st))
		require.Equal(t, "stderr", st.Name)
		require.True(t, strings.HasPrefix(text, st.Text))
		require.Equal(t, cut-start-len(`"content": {"name":"stderr","text":"`), len(st.Text))
		require.Positive(t, m.DroppedBytes)
	}

	for _, bad := range [][]byte{
		frame[:20],                       // inside the header
		frame[:start-10],                 // inside the metadata
		[]byte(`["not", "an", "object"`), // not an object
		[]byte(`{"header": {}}`),         // no content
	} {
		_, err := salvageLegacy(bad, 1<<20)
		require.ErrorIs(t, err, errMalformed, "%s", bad)
	}

	// Only stream text is salvaged; other content is dropped whole.
	other := []byte(`{"header": {"msg_type": "execute_result"}, "parent_header": {}, "content": {"data": {"text/plain": "xxxxx`)
	m, err := salvageLegacy(other, 1000)
	require.NoError(t, err)
	require.JSONEq(t, "{}", string(m.Content))
	require.Equal(t, int64(1000), m.DroppedBytes)
	require.Equal(t, ChannelIOPub, m.Channel)
}

func TestSalvageV1(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("é😀x", 100)
	content, err := json.Marshal(StreamContent{Name: "stdout", Text: text})
	require.NoError(t, err)
	frame := buildV1([][]byte{[]byte("iopub"), []byte(`{"msg_id": "m1", "msg_type": "stream"}`),
		[]byte(`{"msg_id": "p1"}`), []byte(`{}`), content})
	contentStart := len(frame) - len(content)
	for cut := contentStart; cut < len(frame); cut += 7 {
		got, err := salvageV1(frame[:cut], int64(len(frame)))
		require.NoError(t, err)
		require.True(t, got.Truncated)
		require.Equal(t, "p1", got.ParentID())
		var st StreamContent
		require.NoError(t, got.DecodeContent(&st))
		require.True(t, strings.HasPrefix(text, st.Text), "cut %d", cut)
		require.True(t, utf8.ValidString(st.Text))
	}
	_, err = salvageV1(frame[:70], int64(len(frame)))
	require.ErrorIs(t, err, errMalformed, "cut inside the header")
}

// buildV1 builds a v1 frame from its parts, as Jupyter Server's
// serialize_msg_to_ws_v1 does.
func buildV1(parts [][]byte) []byte {
	n := len(parts) + 1
	out := make([]byte, 8*(n+1))
	putLE := func(b []byte, v int) {
		for i := range 8 {
			b[i] = byte(v >> (8 * i))
		}
	}
	putLE(out, n)
	off := 8 * (n + 1)
	for i, p := range parts {
		putLE(out[8*(i+1):], off)
		off += len(p)
	}
	putLE(out[8*n:], off)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
