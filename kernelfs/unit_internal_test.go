package kernelfs

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckRel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rel string
		ok  bool
	}{
		{"a.txt", true},
		{"sub/dir/a.txt", true},
		{"..a", true},
		{"a b/ü.csv", true},
		{"", false},
		{".", false},
		{"..", false},
		{"../a", false},
		{"a/../../b", false},
		{"/etc/passwd", false},
		{"a//b", false},
		{"a/", false},
		{"a/./b", false},
		{"a\x00b", false},
		{"\xff\xfe", false},
		{strings.Repeat("x", 256), false},
		{strings.Repeat("a/", MaxDepth+1) + "f", false},
	} {
		err := checkRel(tc.rel)
		require.Equal(t, tc.ok, err == nil, "%q: %v", tc.rel, err)
	}
}

func TestDirName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "abc-DEF_09", dirName("abc-DEF_09"))
	require.Equal(t, "a_b_c", dirName("a/b.c"))
	require.Equal(t, "_", dirName(""))
	require.Equal(t, "__", dirName(".."))
}

func TestFileEntryKeepsNanoseconds(t *testing.T) {
	t.Parallel()
	var f FileEntry
	require.NoError(t, json.Unmarshal([]byte(`["a/b.txt", 5, 1732890123456789123, 77, 1732890123456789999]`), &f))
	require.Equal(t, "a/b.txt", f.Rel)
	require.Equal(t, Stat{5, 1732890123456789123, 77, 1732890123456789999}, f.Stat)
	require.Error(t, json.Unmarshal([]byte(`["a", 1, 2]`), &f))
}

func TestCallExprIsInert(t *testing.T) {
	t.Parallel()
	// Arguments travel base64-encoded: nothing in them can break out of the
	// Python string literal.
	expr, err := callExpr(envelope{Op: "stat", Args: relsRequest{Rels: []string{"inputs/a'); import os; os.system('x"}}})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(expr, "__import__('"+moduleName+"').call('"))
	require.Equal(t, 4, strings.Count(expr, "'"))
}

func TestProbeExpr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fp   string
		want string
	}{
		{"", "__import__('" + moduleName + "').probe('', 10, 32, 500)"},
		{"1f-123", "__import__('" + moduleName + "').probe('1f-123', 10, 32, 500)"},
		{"x'); import os; ('", ""},
		{"1F", ""},
	} {
		require.Equal(t, tc.want, ProbeExpr(ListRequest{FP: tc.fp, Max: 10, Depth: MaxDepth, Inline: inlineFiles}), "fp %q", tc.fp)
	}
}

func TestParseProbe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		raw  string
		want *Listing
	}{
		{"missing", ``, nil},
		{"failed", `{"status":"error","ename":"NameError"}`, nil},
		{"unchanged, displayed", `{"status":"ok","data":{},"metadata":{}}`, &Listing{Same: true}},
		{"unchanged, repr", `{"status":"ok","data":{"text/plain":"0"}}`, &Listing{Same: true}},
		{"listing", `{"status":"ok","data":{"text/plain":"{\"fp\":\"ab\",\"files\":[[\"a\",1,2,3,4]],\"now\":9}"}}`,
			&Listing{FP: "ab", Files: []FileEntry{{Rel: "a", Stat: Stat{1, 2, 3, 4}}}, Now: 9}},
		{"no fingerprint", `{"status":"ok","data":{"text/plain":"{}"}}`, nil},
		{"not JSON", `{"status":"ok","data":{"text/plain":"<object>"}}`, nil},
		{"other MIME only", `{"status":"ok","data":{"text/html":"x"}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ParseProbe(json.RawMessage(tc.raw)))
		})
	}
}

func TestKernelErrors(t *testing.T) {
	t.Parallel()
	e := &KernelError{Op: "wput", Ename: "SyncError", Evalue: "checksum mismatch"}
	require.Equal(t, "kernel wput: SyncError: checksum mismatch", e.Error())
	var ke *KernelError
	require.True(t, errors.As(error(e), &ke))
	require.ErrorIs(t, exprError("probe", exprStatus{Ename: "NotSetUp", Evalue: "the session directory is not set up"}), ErrNotSetUp)
	require.ErrorIs(t, exprError("stat", exprStatus{Ename: "ModuleNotFoundError", Evalue: "No module named '" + moduleName + "'"}), errNotInstalled)
	require.ErrorAs(t, exprError("stat", exprStatus{Ename: "ModuleNotFoundError", Evalue: "No module named 'x'"}), &ke)
}

// TestReplyTextBase64: a text/plain answer is decoded from base64 straight from the
// reply, also when the JSON escapes a character of it ("\/"); an answer that is not
// a string, or not base64, is an error, never data.
func TestReplyTextBase64(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`"aGVsbG8="`, "hello"},
		{`"YT\/i"`, "a?\xe2"},
		{`""`, ""},
	} {
		r := replyText{decode: true}
		require.NoError(t, json.Unmarshal([]byte(tc.json), &r), tc.json)
		assert.Equal(t, tc.want, string(r.data), tc.json)
		assert.True(t, r.found)
	}
	for _, bad := range []string{`12`, `"not base64!"`, `{"a":1}`} {
		r := replyText{decode: true}
		assert.Error(t, json.Unmarshal([]byte(bad), &r), bad)
	}
	r := replyText{}
	require.NoError(t, json.Unmarshal([]byte(`"{\"a\": 1}"`), &r))
	assert.Equal(t, `{"a": 1}`, r.text)
}
