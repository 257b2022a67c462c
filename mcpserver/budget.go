package mcpserver

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kernelbox/kernelbox/api"
)

// An execute_code answer is built in steps, one per kind of output: the text
// budget of the streams, the result and the error (this file), the images and
// rich displays (display.go), the artifacts (answer_artifacts.go) and the
// clipping itself (clip.go).

// answer is what execute_code returns for a result that ran.
type answer struct {
	content    []mcp.Content
	structured *ExecuteResult
}

// textField is one of the result's variable-length texts, clipped to fit.
type textField struct {
	label   string // section title in the text answer
	full    string
	clipped string
	dropped int
}

// clippedTexts are the result's streams, result and error text clipped to share
// one text budget.
type clippedTexts struct {
	fields  []*textField // stdout, stderr, result, error
	shares  []int        // bytes each field was allowed
	dropped []string     // "N of M bytes of label" for each field that was clipped
}

// render turns a result into the budgeted answer: one text block (status, stdout,
// stderr, result, error, artifacts, notes), the cell's images that fit the image
// budget, links to the artifacts not shown inline, and the structured copy.
func (s *server) render(res *api.Result) answer {
	arts := artifactInfos(res)
	// Images first: whether each is inline changes its artifact's line.
	imgs, inlined, notes := s.images(res)

	head := header(res)
	tail := artifactLines(arts, inlined) + noteLines(append(slices.Clone(res.Notes), notes...))
	texts := clipTexts(res, max(s.opts.MaxTextBytes-len(head)-len(tail), s.opts.MaxTextBytes/4))
	truncated := res.Truncated || len(texts.dropped) > 0
	truncNote := s.truncationNote(res.TruncationNote, texts.dropped)

	var b strings.Builder
	b.WriteString(head)
	if !texts.write(&b) && len(arts) == 0 {
		b.WriteString("(no output)\n")
	}
	b.WriteString(tail)
	if truncated {
		b.WriteString("\ntruncated: " + truncNote + "\n")
	}

	content := []mcp.Content{&mcp.TextContent{Text: b.String()}}
	content = append(content, imgs...)
	content = append(content, artifactLinks(res.SessionID, arts, inlined)...)

	st := &ExecuteResult{
		SessionID:      res.SessionID,
		Status:         string(res.Status),
		ExecutionCount: res.ExecutionCount,
		Stdout:         texts.fields[0].clipped,
		Stderr:         texts.fields[1].clipped,
		Result:         texts.fields[2].clipped,
		Error:          clipError(res.Error, texts.shares[3]),
		Artifacts:      arts,
		Truncated:      truncated,
		TruncationNote: truncNote,
		StateLost:      res.StateLost,
		DurationMS:     res.DurationMS,
	}
	st.Outputs, notes = s.structuredOutputs(res, texts.limits(), notes)
	st.Notes = append(slices.Clone(res.Notes), notes...)
	return answer{content: content, structured: st}
}

// clipTexts shares budget bytes among the result's stdout, stderr, result and
// error text, and clips each to its share.
func clipTexts(res *api.Result, budget int) clippedTexts {
	fields := []*textField{
		{label: "stdout", full: res.Stdout},
		{label: "stderr", full: res.Stderr},
		{label: "result", full: res.Result},
		{label: "error", full: errorText(res.Error)},
	}
	sizes := make([]int, len(fields))
	for i, f := range fields {
		sizes[i] = len(f.full)
	}
	c := clippedTexts{fields: fields, shares: fit(sizes, budget)}
	for i, f := range fields {
		f.clipped, f.dropped = clipMiddle(f.full, c.shares[i])
		if f.dropped > 0 {
			c.dropped = append(c.dropped, fmt.Sprintf("%s of %s bytes of %s", count(f.dropped), count(len(f.full)), f.label))
		}
	}
	return c
}

// write adds a section for each non-empty text to b, and reports whether there
// was any.
func (c clippedTexts) write(b *strings.Builder) bool {
	wrote := false
	for _, f := range c.fields {
		if f.full == "" {
			continue
		}
		wrote = true
		b.WriteString("\n" + f.label + ":\n" + f.clipped)
		if !strings.HasSuffix(f.clipped, "\n") {
			b.WriteByte('\n')
		}
	}
	return wrote
}

// limits are the byte limits for the structured outputs, by stream name,
// "result" and "error". Outputs are clipped only where the text answer was: the
// ANSI-colored traceback of an error output, say, is longer than the plain one
// it matches.
func (c clippedTexts) limits() map[string]int {
	limits := map[string]int{}
	for i, f := range c.fields {
		limits[f.label] = math.MaxInt
		if f.dropped > 0 {
			limits[f.label] = c.shares[i]
		}
	}
	return limits
}

// truncationNote adds to the result's own note what this answer dropped.
func (s *server) truncationNote(note string, dropped []string) string {
	if len(dropped) == 0 {
		return note
	}
	ours := fmt.Sprintf("this answer is capped at %s bytes of text, so the middle was dropped from its longest parts (%s). The dropped text is not kept: print less (head, tail, a summary), or write the output to a file under outputs/ and read it in pages with read_artifact",
		count(s.opts.MaxTextBytes), strings.Join(dropped, ", "))
	return joinNonEmpty("; ", note, ours)
}

// fit shares budget bytes among texts of the given sizes: a text that fits its fair
// share keeps all of it, and what it leaves is shared among the longer ones.
func fit(sizes []int, budget int) []int {
	shares := slices.Clone(sizes)
	total := 0
	for _, n := range sizes {
		total += n
	}
	if total <= budget {
		return shares
	}
	order := make([]int, len(sizes))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return sizes[a] - sizes[b] })
	left := budget
	for k, i := range order {
		fair := left / (len(order) - k)
		shares[i] = min(sizes[i], fair)
		left -= shares[i]
	}
	return shares
}
