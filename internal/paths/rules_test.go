package paths

import (
	"errors"
	"strings"
	"testing"

	"github.com/kernelbox/kernelbox/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckName: the base rule, and each extra check only when asked for.
func TestCheckName(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		plain Problem // under Plain; 0 accepts
		list  Problem // under Listed
	}{
		{"data.csv", 0, 0},
		{"..a", 0, 0},
		{"ü b.csv", 0, 0},
		{strings.Repeat("n", MaxNameBytes), 0, 0},
		{"", Empty, Empty},
		{".", DotName, DotName},
		{"..", DotName, DotName},
		{"a/b", HasSlash, HasSlash},
		{"/", HasSlash, HasSlash},
		{"a\x00b", HasNUL, HasNUL},
		{strings.Repeat("n", MaxNameBytes+1), NameTooLong, NameTooLong},
		{"bad\xffname", 0, NotUTF8},
		{TempPrefix + "x", 0, TempName},
		{TempPrefix, 0, TempName},
	}
	for _, c := range cases {
		for _, r := range []struct {
			rule NameRule
			want Problem
		}{{Plain, c.plain}, {Listed, c.list}} {
			err := CheckName(c.name, r.rule)
			if r.want == 0 {
				assert.NoError(t, err, "%q under %d", c.name, r.rule)
				continue
			}
			var e *Error
			if assert.True(t, errors.As(err, &e), "%q under %d: %v", c.name, r.rule, err) {
				assert.Equal(t, r.want, e.Problem, "%q under %d", c.name, r.rule)
				assert.ErrorIs(t, err, ErrInvalidName)
			}
		}
	}
	assert.ErrorIs(t, CheckName("bad\xff", NeedUTF8), ErrInvalidName)
	assert.NoError(t, CheckName(TempPrefix+"x", NeedUTF8))
	assert.NoError(t, CheckName("bad\xff", NoTemp))
}

// TestCheckPath: the files API's rule (the zero PathRule) and each allowance.
func TestCheckPath(t *testing.T) {
	t.Parallel()
	cases := []struct {
		path string
		want Problem
	}{
		{"inputs/data.csv", 0},
		{"a", 0},
		{"sub/dir/a.txt", 0},
		{"..a/b..", 0},
		{"a b/ü.csv", 0},
		{"", Empty},
		{".", Empty},
		{"..", DotDotElement},
		{"../a", DotDotElement},
		{"a/../../b", DotDotElement},
		{"a/./b", DotElement},
		{"/etc/passwd", Absolute},
		{"a//b", EmptyElement},
		{"a/", EmptyElement},
		{"a\x00b", HasNUL},
		{"\xff\xfe", NotUTF8},
		{"ok/\xc0\xaf", NotUTF8}, // an overlong encoding of "/"
		{strings.Repeat("n", MaxNameBytes+1), ElementTooLong},
		{strings.Repeat("d/", 2100) + "f", PathTooLong},
		{TempPrefix + "x", TempName},
		{"inputs/" + TempPrefix + "1-2", TempName},
	}
	for _, c := range cases {
		err := CheckPath(c.path, PathRule{})
		if c.want == 0 {
			assert.NoError(t, err, "%q", c.path)
			continue
		}
		var e *Error
		if assert.True(t, errors.As(err, &e), "%q: %v", c.path, err) {
			assert.Equal(t, c.want, e.Problem, "%q", c.path)
			assert.ErrorIs(t, err, ErrInvalidPath)
		}
	}
	assert.NoError(t, CheckPath("", PathRule{AllowRoot: true}))
	assert.NoError(t, CheckPath(".", PathRule{AllowRoot: true}))
	assert.Error(t, CheckPath("./a", PathRule{AllowRoot: true}))
	assert.NoError(t, CheckPath("a/"+TempPrefix+"x", PathRule{AllowTemp: true}))
	deep := PathRule{MaxDepth: 2}
	assert.NoError(t, CheckPath("a/b/f", deep))
	var e *Error
	require.ErrorAs(t, CheckPath("a/b/c/f", deep), &e)
	assert.Equal(t, TooDeep, e.Problem)
}

// TestCheckSessionID: api's rule, and its words in the message.
func TestCheckSessionID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"a", "A-z_09", strings.Repeat("x", 64)} {
		assert.NoError(t, CheckSessionID(id), id)
	}
	for _, id := range []string{"", "a/b", "..", "a b", strings.Repeat("x", 65), "ü"} {
		err := CheckSessionID(id)
		assert.ErrorIs(t, err, ErrInvalidSessionID, id)
		assert.Contains(t, err.Error(), api.SessionIDRule, id)
	}
}

// TestMessages: every message comes from the table, names its subject and kind,
// and a long value is shown cut.
func TestMessages(t *testing.T) {
	t.Parallel()
	for p := NotSessionID; p <= TooDeep; p++ {
		require.NotEmpty(t, reasons[p], "problem %d has no reason", p)
		assert.NotContains(t, p.String(), "problem ")
	}
	assert.EqualError(t, CheckName("a/b", Plain), `name "a/b": contains '/': invalid file name`)
	assert.EqualError(t, CheckPath("a//b", PathRule{}), `path "a//b": empty element (a doubled or trailing '/'): invalid path`)
	assert.EqualError(t, CheckSessionID("a/b"), `session "a/b": not `+api.SessionIDRule+`: invalid session id`)
	long := strings.Repeat("d/", 2100) + "f"
	err := CheckPath(long, PathRule{})
	assert.Less(t, len(err.Error()), 200, "a long path is shown cut")
	assert.Contains(t, err.Error(), "longer than 4096 bytes")
}
