package mcpserver

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
)

func TestFit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		sizes  []int
		budget int
		want   []int
	}{
		{"all fit", []int{10, 20, 0, 5}, 100, []int{10, 20, 0, 5}},
		{"one big", []int{10, 1000, 0, 5}, 100, []int{10, 85, 0, 5}},
		{"two big share", []int{500, 1000, 0, 10}, 110, []int{50, 50, 0, 10}},
		{"all big", []int{500, 500, 500, 500}, 100, []int{25, 25, 25, 25}},
		{"zero budget", []int{5, 5}, 0, []int{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := fit(tt.sizes, tt.budget)
			assert.Equal(t, tt.want, got)
			sum := 0
			for _, n := range got {
				sum += n
			}
			assert.LessOrEqual(t, sum, max(tt.budget, 0))
		})
	}
}

func TestClipMiddle(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		n    int
	}{
		{"ascii", strings.Repeat("abcdefghij", 1000), 100},
		{"lines", strings.Repeat("line of output\n", 1000), 200},
		{"utf8", strings.Repeat("héllo wörld ✓ 日本語 ", 500), 101},
		{"tiny budget", strings.Repeat("x", 50), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, dropped := clipMiddle(tt.in, tt.n)
			require.True(t, utf8.ValidString(got), "clipped text is valid UTF-8")
			m := clipped.FindStringSubmatch(got)
			require.NotNil(t, m, "marker in %q", got)
			head, reported, tail := m[1], m[2], m[3]
			assert.Equal(t, count(dropped), reported)
			assert.True(t, strings.HasPrefix(tt.in, head), "head is a prefix")
			assert.True(t, strings.HasSuffix(tt.in, tail), "tail is a suffix")
			assert.LessOrEqual(t, len(head)+len(tail), tt.n+1)
			// The regexp may leave the head's own last newline to the marker.
			assert.Contains(t, []int{len(head), len(head) + 1}, len(tt.in)-dropped-len(tail))
		})
	}
	t.Run("fits", func(t *testing.T) {
		got, dropped := clipMiddle("short", 10)
		assert.Equal(t, "short", got)
		assert.Zero(t, dropped)
	})
}

var clipped = regexp.MustCompile(`(?s)^(.*?)\n?\[\.\.\. ([0-9,]+) bytes dropped here \.\.\.\]\n(.*)$`)

func TestArtifactURI(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"plot.png", "display/cell1-abcd-1.png", "sub dir/a b#c?.csv", "ünï/ç.txt"} {
		uri := ArtifactURI("s-1", name)
		sess, got, err := parseArtifactURI(uri)
		require.NoError(t, err, uri)
		assert.Equal(t, "s-1", sess)
		assert.Equal(t, name, got)
	}
	_, _, err := parseArtifactURI("kernelbox://artifacts/only")
	assert.Error(t, err)
	_, _, err = parseArtifactURI("file:///etc/passwd")
	assert.Error(t, err)
}

// TestRender budgets a synthetic result: long stdout is cut with a note, a small
// image is inlined, a large one is linked, and the structured copy drops the large
// image's data and says so.
func TestRender(t *testing.T) {
	t.Parallel()
	small := []byte("\x89PNG small image")
	large := []byte("\x89PNG " + strings.Repeat("L", 5000))
	art := func(name string, data []byte) api.Artifact {
		return api.Artifact{Name: name, Path: "/art/s/" + name, Size: int64(len(data)), MIME: "image/png"}
	}
	b64 := func(b []byte) json.RawMessage {
		raw, _ := json.Marshal(base64.StdEncoding.EncodeToString(b))
		return raw
	}
	stdout := strings.Repeat("0123456789\n", 2000)
	res := &api.Result{
		SessionID: "s",
		Status:    api.StatusOK,
		Stdout:    stdout,
		Outputs: []api.Output{
			{OutputType: "stream", Name: "stdout", Text: stdout},
			{OutputType: "display_data", Data: map[string]json.RawMessage{"image/png": b64(small), "text/plain": json.RawMessage(`"<Figure>"`)},
				Artifacts: map[string]string{"image/png": "display/a.png"}},
			{OutputType: "display_data", Data: map[string]json.RawMessage{"image/png": b64(large), "text/plain": json.RawMessage(`"<Figure>"`)},
				Artifacts: map[string]string{"image/png": "display/b.png"}},
		},
		// copy.png holds the same bytes as the small image: the display names its
		// artifact, so a file with equal content is not taken for it.
		Artifacts: []api.Artifact{art("copy.png", small), art("display/a.png", small), art("display/b.png", large)},
	}
	s := &server{opts: Options{MaxTextBytes: 2000, MaxImageBytes: 1000}}
	s.opts.setDefaults()
	a := s.render(res)

	require.Len(t, a.content, 4, "text, the small image, links to copy.png and the large one")
	txt := a.content[0].(*mcp.TextContent).Text
	assert.Less(t, len(txt), 3000)
	assert.Contains(t, txt, "status: ok")
	assert.Contains(t, txt, "bytes dropped here")
	assert.Contains(t, txt, "truncated: this answer is capped at 2,000 bytes")
	assert.Contains(t, txt, "display/a.png (image/png, 16 bytes) kernelbox://artifacts/s/display/a.png [shown below]")
	assert.Contains(t, txt, `read it with read_artifact name="display/b.png"`)
	img := a.content[1].(*mcp.ImageContent)
	assert.Equal(t, small, img.Data)
	assert.Contains(t, txt, "- copy.png (image/png, 16 bytes) kernelbox://artifacts/s/copy.png\n", "not shown")
	link := a.content[2].(*mcp.ResourceLink)
	assert.Equal(t, "kernelbox://artifacts/s/copy.png", link.URI)
	link = a.content[3].(*mcp.ResourceLink)
	assert.Equal(t, "kernelbox://artifacts/s/display/b.png", link.URI)

	st := a.structured
	assert.True(t, st.Truncated)
	assert.Equal(t, st.Stdout, st.Outputs[0].Text, "the stream output is clipped like stdout")
	assert.Less(t, len(st.Stdout), 2000)
	assert.Contains(t, st.Outputs[1].Data, "image/png")
	assert.NotContains(t, st.Outputs[2].Data, "image/png", "over the rich budget")
	assert.Contains(t, st.Outputs[2].Data, "text/plain")
	assert.Contains(t, strings.Join(st.Notes, "\n"), "outputs[2]: its image/png data")
	assert.Contains(t, strings.Join(st.Notes, "\n"), "it is the artifact display/b.png")
	assert.Len(t, res.Outputs[2].Data, 2, "the executor's result is not modified")
}

// TestRenderError shows a traceback and keeps its end when it is long.
func TestRenderError(t *testing.T) {
	t.Parallel()
	tb := []string{"Traceback (most recent call last):"}
	for range 500 {
		tb = append(tb, `  File "<cell>", line 1, in f`)
	}
	tb = append(tb, "RecursionError: maximum recursion depth exceeded")
	res := &api.Result{SessionID: "s", Status: api.StatusError, Outputs: []api.Output{},
		Error: &api.ErrorInfo{Ename: "RecursionError", Evalue: "maximum recursion depth exceeded", Traceback: tb}}
	s := &server{opts: Options{MaxTextBytes: 1000}}
	s.opts.setDefaults()
	a := s.render(res)
	txt := a.content[0].(*mcp.TextContent).Text
	assert.Contains(t, txt, "status: error")
	assert.Contains(t, txt, "RecursionError: maximum recursion depth exceeded")
	assert.Less(t, len(txt), 1600)
	assert.Equal(t, "RecursionError: maximum recursion depth exceeded", a.structured.Error.Traceback[len(a.structured.Error.Traceback)-1])
}
