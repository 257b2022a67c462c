package mcpserver

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kernelbox/kernelbox/executor"
)

// Most artifact lines and links one execute_code answer carries; list_artifacts
// has them all.
const (
	maxArtifactLines = 50
	maxLinks         = 20
)

// inlineImageTypes are the display data types returned as MCP image content.
var inlineImageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

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

// render turns a result into the budgeted answer: one text block (status, stdout,
// stderr, result, error, artifacts, notes), the cell's images that fit the image
// budget, links to the artifacts not shown inline, and the structured copy.
func (s *server) render(res *executor.Result) answer {
	arts := make([]ArtifactInfo, len(res.Artifacts))
	for i, a := range res.Artifacts {
		arts[i] = ArtifactInfo{Name: a.Name, URI: ArtifactURI(res.SessionID, a.Name), Path: a.Path, Size: a.Size, MIME: a.MIME, SHA256: a.SHA256}
	}
	var notes []string

	// Images first: whether each is inline changes its artifact's line.
	imgs, inlined, imgNotes := s.images(res, arts)
	notes = append(notes, imgNotes...)

	fields := []*textField{
		{label: "stdout", full: res.Stdout},
		{label: "stderr", full: res.Stderr},
		{label: "result", full: res.Result},
		{label: "error", full: errorText(res.Error)},
	}
	head := header(res)
	tail := artifactLines(arts, inlined) + noteLines(append(slices.Clone(res.Notes), notes...))
	budget := max(s.opts.MaxTextBytes-len(head)-len(tail), s.opts.MaxTextBytes/4)
	sizes := make([]int, len(fields))
	for i, f := range fields {
		sizes[i] = len(f.full)
	}
	shares := fit(sizes, budget)
	var dropped []string
	for i, f := range fields {
		f.clipped, f.dropped = clipMiddle(f.full, shares[i])
		if f.dropped > 0 {
			dropped = append(dropped, fmt.Sprintf("%s of %s bytes of %s", count(f.dropped), count(len(f.full)), f.label))
		}
	}
	truncNote := res.TruncationNote
	if len(dropped) > 0 {
		ours := fmt.Sprintf("this answer is capped at %s bytes of text, so the middle was dropped from its longest parts (%s). The dropped text is not kept: print less (head, tail, a summary), or write the output to a file under outputs/ and read it in pages with read_artifact",
			count(s.opts.MaxTextBytes), strings.Join(dropped, ", "))
		truncNote = joinNonEmpty("; ", truncNote, ours)
	}

	var b strings.Builder
	b.WriteString(head)
	empty := true
	for _, f := range fields {
		if f.full == "" {
			continue
		}
		empty = false
		b.WriteString("\n" + f.label + ":\n" + f.clipped)
		if !strings.HasSuffix(f.clipped, "\n") {
			b.WriteByte('\n')
		}
	}
	if empty && len(arts) == 0 {
		b.WriteString("(no output)\n")
	}
	b.WriteString(tail)
	if res.Truncated || len(dropped) > 0 {
		b.WriteString("\ntruncated: " + truncNote + "\n")
	}

	content := []mcp.Content{&mcp.TextContent{Text: b.String()}}
	content = append(content, imgs...)
	links := 0
	for _, a := range arts {
		if inlined[a.Name] || links == maxLinks {
			continue
		}
		links++
		size := a.Size
		content = append(content, &mcp.ResourceLink{URI: a.URI, Name: a.Name, MIMEType: a.MIME, Size: &size,
			Description: "artifact of session " + res.SessionID})
	}

	st := &ExecuteResult{
		SessionID:      res.SessionID,
		Status:         string(res.Status),
		ExecutionCount: res.ExecutionCount,
		Stdout:         fields[0].clipped,
		Stderr:         fields[1].clipped,
		Result:         fields[2].clipped,
		Error:          clipError(res.Error, shares[3]),
		Artifacts:      arts,
		Truncated:      res.Truncated || len(dropped) > 0,
		TruncationNote: truncNote,
		StateLost:      res.StateLost,
		DurationMS:     res.DurationMS,
	}
	// Outputs are clipped only where the text answer was: the ANSI-colored
	// traceback of an error output, say, is longer than the plain one it matches.
	limits := map[string]int{}
	for i, name := range []string{"stdout", "stderr", "result", "error"} {
		limits[name] = math.MaxInt
		if fields[i].dropped > 0 {
			limits[name] = shares[i]
		}
	}
	st.Outputs, notes = s.structuredOutputs(res, arts, limits, notes)
	st.Notes = append(slices.Clone(res.Notes), notes...)
	return answer{content: content, structured: st}
}

// header is the first line of the text answer, and the state-lost warning.
func header(res *executor.Result) string {
	h := "status: " + string(res.Status)
	if res.ExecutionCount > 0 {
		h += " | execution_count: " + strconv.Itoa(res.ExecutionCount)
	}
	h += fmt.Sprintf(" | duration: %s | session: %s\n", duration(res.DurationMS), res.SessionID)
	if res.StateLost {
		h += "state_lost: true - the session's variables are gone (its kernel was restarted); re-run any setup code. Files are kept.\n"
	}
	return h
}

// artifactLines lists the artifacts for the text answer, noting which are shown.
func artifactLines(arts []ArtifactInfo, inlined map[string]bool) string {
	if len(arts) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nartifacts (%d, read with read_artifact):\n", len(arts))
	for i, a := range arts {
		if i == maxArtifactLines {
			fmt.Fprintf(&b, "- ... and %d more: see list_artifacts\n", len(arts)-i)
			break
		}
		fmt.Fprintf(&b, "- %s (%s, %s) %s", a.Name, a.MIME, humanBytes(a.Size), a.URI)
		if inlined[a.Name] {
			b.WriteString(" [shown below]")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func noteLines(notes []string) string {
	if len(notes) == 0 {
		return ""
	}
	return "\nnotes:\n- " + strings.Join(notes, "\n- ") + "\n"
}

// images returns the cell's images that fit the image budget as image content, the
// names of their artifacts, and notes about the ones left out.
func (s *server) images(res *executor.Result, arts []ArtifactInfo) ([]mcp.Content, map[string]bool, []string) {
	left := s.opts.MaxImageBytes
	inlined := map[string]bool{}
	var out []mcp.Content
	var notes []string
	for _, o := range res.Outputs {
		if o.OutputType != "display_data" && o.OutputType != "execute_result" {
			continue
		}
		for _, mt := range inlineImageTypes {
			raw, ok := o.Data[mt]
			if !ok {
				continue
			}
			img, ok := decodeBase64(raw)
			if !ok {
				continue
			}
			name := artifactFor(arts, img)
			if len(img) <= left {
				left -= len(img)
				out = append(out, &mcp.ImageContent{Data: img, MIMEType: mt})
				if name != "" {
					inlined[name] = true
				}
				continue
			}
			where := "it was not saved as an artifact"
			if name != "" {
				where = "read it with read_artifact name=" + strconv.Quote(name)
			}
			notes = append(notes, fmt.Sprintf("an image (%s, %s) was not shown inline: images are capped at %s per answer; %s",
				mt, humanBytes(int64(len(img))), humanBytes(int64(s.opts.MaxImageBytes)), where))
		}
	}
	return out, inlined, notes
}

// artifactFor returns the name of the artifact holding exactly data, or "".
func artifactFor(arts []ArtifactInfo, data []byte) string {
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	for _, a := range arts {
		if a.SHA256 == h {
			return a.Name
		}
	}
	return ""
}

// structuredOutputs copies the outputs for the structured result: texts clipped to
// the limits (by stream name, "result" and "error"), rich data kept while it fits
// the image budget and left out (with a note) beyond it.
func (s *server) structuredOutputs(res *executor.Result, arts []ArtifactInfo, limits map[string]int, notes []string) ([]executor.Output, []string) {
	left := s.opts.MaxImageBytes
	outs := make([]executor.Output, 0, len(res.Outputs))
	for i, o := range res.Outputs {
		c := o
		switch o.OutputType {
		case "stream":
			if limit, ok := limits[o.Name]; ok {
				c.Text, _ = clipMiddle(o.Text, limit)
			}
		case "error":
			c.Traceback = clipLines(o.Traceback, limits["error"])
		case "display_data", "execute_result":
			c.Data = make(map[string]json.RawMessage, len(o.Data))
			textShare := limits["result"]
			if o.OutputType == "display_data" {
				textShare = s.opts.MaxTextBytes / 4
			}
			for _, mt := range sortedKeys(o.Data) {
				raw := o.Data[mt]
				if mt == "text/plain" {
					c.Data[mt] = clipJSONText(raw, textShare)
					continue
				}
				if len(raw) <= left {
					left -= len(raw)
					c.Data[mt] = raw
					continue
				}
				where := ""
				if data, ok := richData(raw); ok {
					if name := artifactFor(arts, data); name != "" {
						where = "; it is the artifact " + name
					}
				}
				notes = append(notes, fmt.Sprintf("outputs[%d]: its %s data (%s) is left out of this structured result, over the %s budget for rich data%s",
					i, mt, humanBytes(int64(len(raw))), humanBytes(int64(s.opts.MaxImageBytes)), where))
			}
		}
		outs = append(outs, c)
	}
	return outs, notes
}

// errorText is the error section: the traceback when there is one (it ends with
// the exception), else "Ename: evalue".
func errorText(e *executor.ErrorInfo) string {
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
func clipError(e *executor.ErrorInfo, n int) *executor.ErrorInfo {
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
	text, err := executor.MultilineString(raw)
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

// decodeBase64 decodes base64 display data (an nbformat multiline string).
func decodeBase64(raw json.RawMessage) ([]byte, bool) {
	text, err := executor.MultilineString(raw)
	if err != nil {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' {
			return -1
		}
		return r
	}, text))
	return b, err == nil
}

// richData returns the bytes an artifact saved from display data would hold: the
// decoded base64 of images, the text of others.
func richData(raw json.RawMessage) ([]byte, bool) {
	if b, ok := decodeBase64(raw); ok {
		return b, true
	}
	text, err := executor.MultilineString(raw)
	return []byte(text), err == nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func joinNonEmpty(sep string, parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, sep)
}

// count formats n with thousands separators: 123,456.
func count(n int) string {
	if n < 0 {
		return "-" + count(-n)
	}
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// humanBytes formats a size: 512 bytes, 12.3 KiB, 4 MiB.
func humanBytes(n int64) string {
	const k = 1024
	switch {
	case n < k:
		return strconv.FormatInt(n, 10) + " bytes"
	case n < k*k:
		return trimZero(float64(n)/k) + " KiB"
	default:
		return trimZero(float64(n)/(k*k)) + " MiB"
	}
}

func trimZero(f float64) string {
	return strings.TrimSuffix(strconv.FormatFloat(f, 'f', 1, 64), ".0")
}

func duration(ms int64) string {
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + " ms"
	}
	return trimZero(float64(ms)/1000) + " s"
}
