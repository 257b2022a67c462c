package jupyter

import (
	"encoding/json"
	"strings"
	"testing"
)

var streamSeeds = []string{
	`{"name": "stdout", "text": "hello\n"}`,
	`{"text":"a\"b\\c\/d\b\f\n\r\t","name":"stderr"}`,
	` { "name" : "stdout" , "text" : "\u00e9\u4e2d\u0000\uFFFF" } `,
	`{"name": "stdout", "text": "caf\u00e9 ✓ 𝄞 \ud834\udd1e"}`,
	`{"name": "stdout", "text": "lone \ud800 surrogate"}`,
	`{"name": "stdout", "text": "bad utf8 \xff\xfe"}`,
	`{"name": "stdout", "text": "ctrl ` + "\x01" + `"}`,
	`{"Name": "stdout", "TEXT": "other case"}`,
	`{"name": "stdout", "text": "x", "extra": 1}`,
	`{"name": null, "text": "x"}`,
	`{"name": "stdout", "text": "dup", "text": "last"}`,
	`{"name": "stdout"}`,
	`{}`,
	`{"name": "stdout", "text": "x"} trailing`,
	`{"name": "stdout", "text": "unterminated`,
	`{"name": "stdout", "text": "bad \q escape"}`,
	`{"name": "stdout", "text": "short \u12"}`,
	`[1, 2]`,
	``,
}

// Whatever decodeStream accepts, encoding/json decodes to the same result.
func FuzzDecodeStream(f *testing.F) {
	for _, s := range streamSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := decodeStream(b)
		if !ok {
			return
		}
		want := StreamContent{Name: "unset", Text: "unset"}
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("decodeStream accepted %q, which encoding/json rejects: %v", b, err)
		}
		have := StreamContent{Name: "unset", Text: "unset"}
		mergeStream(&have, got)
		if have != want {
			t.Fatalf("%q: decodeStream gave %+v, encoding/json %+v", b, have, want)
		}
	})
}

// The fast path takes the shapes ipykernel sends; the rest falls back.
func TestDecodeStreamTakesTheUsualShapes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		fast bool
	}{
		{streamSeeds[0], true},
		{streamSeeds[1], true},
		{streamSeeds[2], true},
		{`{"name": "stdout", "text": "caf\u00e9 ✓ 𝄞"}`, true},
		{streamSeeds[4], false},
		{streamSeeds[5], false},
		{streamSeeds[7], false},
		{streamSeeds[8], false},
		{`{"name":"stdout","text":"` + strings.Repeat(`line\n`, 1000) + `"}`, true},
	} {
		if _, ok := decodeStream([]byte(tc.in)); ok != tc.fast {
			t.Errorf("%.60q: fast path %v, want %v", tc.in, ok, tc.fast)
		}
		// Either way DecodeContent gives what encoding/json gives.
		var want, got StreamContent
		wantErr := json.Unmarshal([]byte(tc.in), &want)
		gotErr := (&Message{Content: json.RawMessage(tc.in)}).DecodeContent(&got)
		if (wantErr == nil) != (gotErr == nil) || got != want {
			t.Errorf("%.60q: DecodeContent %+v (%v), encoding/json %+v (%v)", tc.in, got, gotErr, want, wantErr)
		}
	}
}

func BenchmarkDecodeStream10MiB(b *testing.B) {
	text := strings.Repeat("a line of output, with a tab\tand an accent é\n", (10<<20)/46)
	raw, _ := json.Marshal(StreamContent{Name: "stdout", Text: text})
	m := &Message{Content: raw}
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var s StreamContent
			if err := m.DecodeContent(&s); err != nil || len(s.Text) != len(text) {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var s StreamContent
			if err := json.Unmarshal(raw, &s); err != nil || len(s.Text) != len(text) {
				b.Fatal(err)
			}
		}
	})
}
