package calls

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kernelbox/kernelbox/api"
)

// What a finished call keeps of its Result is bounded twice (issue 21 item 2):
// each kept Result by Options.MaxResultBytes, by slimming it as the call ends,
// and all kept Results together by Options.MaxTotalResultBytes, by evicting the
// bodies of the oldest. Neither changes a Result in place: front ends and the
// call's log may hold the one the executor returned (the log's events share its
// display data), so a slimmed or evicted Result is a new value, and the bytes
// it no longer holds are freed once nobody else does.

// bigData is the size past which a display's data item (other than text/plain)
// is dropped from a Result over its bound.
const bigData = 4 << 10

// resultSize is a kept Result's weight against the bounds: its texts, data and
// lists plus fixed overheads, close to its JSON size.
func resultSize(res *api.Result) int64 {
	if res == nil {
		return 0
	}
	n := 256 + len(res.SessionID) + len(res.Status) + len(res.Stdout) + len(res.Stderr) +
		len(res.Result) + len(res.TruncationNote)
	if e := res.Error; e != nil {
		n += 32 + len(e.Ename) + len(e.Evalue)
		for _, tb := range e.Traceback {
			n += 4 + len(tb)
		}
	}
	for i := range res.Outputs {
		n += int(outputSize(&res.Outputs[i]))
	}
	for _, a := range res.Artifacts {
		n += 96 + len(a.Path) + len(a.Name) + len(a.SHA256) + len(a.MIME)
	}
	for _, note := range res.Notes {
		n += 4 + len(note)
	}
	return int64(n)
}

// outputSize is one output's weight, close to its JSON size.
func outputSize(o *api.Output) int64 {
	n := 64 + len(o.OutputType) + len(o.Name) + len(o.Text) + len(o.Ename) + len(o.Evalue) + len(o.DisplayID)
	for k, v := range o.Data {
		n += len(k) + len(v)
	}
	for k, v := range o.Metadata {
		n += len(k) + len(v)
	}
	for _, tb := range o.Traceback {
		n += len(tb)
	}
	return int64(n)
}

// noteRoom is the room slim leaves for its note.
const noteRoom = 4 << 10

// slim returns res, or a copy of it within limit bytes when it is over, and the
// size of what it returns. The copy loses, in this order, the rich display data
// over bigData (the items the executor saved as artifacts first: they stay on
// disk, listed in the Result's artifacts), then the end of its longest texts; it
// is marked truncated with a note saying what went and why. A Result made of
// many small parts may stay over limit: what cannot be cut is counted, and the
// total bound evicts it sooner.
func slim(res *api.Result, limit int64) (*api.Result, int64) {
	size := resultSize(res)
	if size <= limit {
		return res, size
	}
	// Room for the note this adds (a few lines: listSome lists a few items).
	target := limit
	if limit > 4*noteRoom {
		target = limit - noteRoom
	}
	c := *res
	c.Outputs = slices.Clone(res.Outputs)
	var notes []string
	size, notes = dropData(&c, size, target, notes)
	if size > target {
		var cut int64
		size, cut = cutTexts(&c, size, target)
		if cut > 0 {
			notes = append(notes, fmt.Sprintf("%s of its longest texts cut", humanBytes(cut)))
		}
	}
	note := fmt.Sprintf("this kept result was slimmed to stay within %s per kept result: %s", humanBytes(limit), strings.Join(notes, "; "))
	c.Truncated = true
	c.TruncationNote = joinNotes(c.TruncationNote, note)
	return &c, resultSize(&c)
}

// dropData drops c's big rich data items, saved ones first, then the largest,
// until c is within limit; c.Outputs is c's own slice, their Data maps are not.
func dropData(c *api.Result, size, limit int64, notes []string) (int64, []string) {
	type item struct {
		out   int
		mime  string
		size  int64
		saved string // the artifact it was saved as, or ""
	}
	var items []item
	for i, o := range c.Outputs {
		for mt, v := range o.Data {
			if mt != "text/plain" && len(v) > bigData {
				items = append(items, item{i, mt, int64(len(v)), o.Artifacts[mt]})
			}
		}
	}
	slices.SortFunc(items, func(a, b item) int {
		if (a.saved == "") != (b.saved == "") {
			if a.saved != "" {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(b.size, a.size), cmp.Compare(a.out, b.out), strings.Compare(a.mime, b.mime))
	})
	owned := map[int]bool{}
	var saved, lost []string
	var savedBytes, lostBytes int64
	for _, it := range items {
		if size <= limit {
			break
		}
		o := &c.Outputs[it.out]
		if !owned[it.out] {
			o.Data, owned[it.out] = maps.Clone(o.Data), true
		}
		delete(o.Data, it.mime)
		size -= int64(len(it.mime)) + it.size
		label := fmt.Sprintf("outputs[%d] %s", it.out, it.mime)
		if it.saved != "" {
			saved, savedBytes = append(saved, label+" (artifact "+it.saved+")"), savedBytes+it.size
		} else {
			lost, lostBytes = append(lost, label), lostBytes+it.size
		}
	}
	if len(saved) > 0 {
		notes = append(notes, fmt.Sprintf("%d display data items (%s) dropped that are saved as artifacts, nothing lost: %s", len(saved), humanBytes(savedBytes), listSome(saved)))
	}
	if len(lost) > 0 {
		notes = append(notes, fmt.Sprintf("%d display data items (%s) dropped that were not saved anywhere: %s", len(lost), humanBytes(lostBytes), listSome(lost)))
	}
	return size, notes
}

// cutMark ends a text cut by cutTexts.
const cutMark = "\n[... %d bytes cut from this kept result ...]\n"

// cutTexts cuts the end of c's longest texts until c is within limit, and
// returns c's size and the bytes cut. c.Outputs is c's own slice.
func cutTexts(c *api.Result, size, limit int64) (int64, int64) {
	if c.Error != nil {
		e := *c.Error
		e.Traceback = slices.Clone(e.Traceback)
		c.Error = &e
	}
	var cut int64
	for range 256 {
		if size <= limit {
			break
		}
		p := longestText(c)
		if p == nil || len(*p) <= 2*len(cutMark) {
			break
		}
		over := size - limit + int64(len(cutMark)) + 20
		keep := clipUTF8(*p, int(max(0, int64(len(*p))-over)))
		gone := len(*p) - len(keep)
		*p = keep + fmt.Sprintf(cutMark, gone)
		size += int64(len(*p)) - int64(len(keep)+gone)
		cut += int64(gone)
	}
	return size, cut
}

// longestText returns the longest text field of c.
func longestText(c *api.Result) *string {
	var best *string
	consider := func(s *string) {
		if best == nil || len(*s) > len(*best) {
			best = s
		}
	}
	consider(&c.Stdout)
	consider(&c.Stderr)
	consider(&c.Result)
	for i := range c.Outputs {
		consider(&c.Outputs[i].Text)
	}
	if e := c.Error; e != nil {
		consider(&e.Evalue)
		for i := range e.Traceback {
			consider(&e.Traceback[i])
		}
	}
	return best
}

// evicted returns what is kept of res once its body is evicted for the total
// bound: how it ended, the name and first KiB of its error, its artifacts (still
// on disk) and notes, and a note saying what went and why.
func evicted(res *api.Result, size, total int64) *api.Result {
	e := &api.Result{
		SessionID: res.SessionID, Status: res.Status, ExecutionCount: res.ExecutionCount,
		Outputs: []api.Output{}, Artifacts: res.Artifacts, Notes: res.Notes,
		StateLost: res.StateLost, DurationMS: res.DurationMS, Truncated: true,
	}
	if res.Error != nil {
		e.Error = &api.ErrorInfo{Ename: res.Error.Ename, Evalue: clipUTF8(res.Error.Evalue, 1<<10)}
	}
	e.TruncationNote = joinNotes(clipUTF8(res.TruncationNote, 1<<10), fmt.Sprintf(
		"this call's outputs, stdout, stderr and traceback (%s) were dropped from memory after it ended: the kept results of all finished calls are capped at %s in all, and newer calls' results came after it; its artifacts are listed and still on disk",
		humanBytes(size), humanBytes(total)))
	if e.Artifacts == nil {
		e.Artifacts = []api.Artifact{}
	}
	return e
}

func joinNotes(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// listSome lists the first few of names.
func listSome(names []string) string {
	const few = 5
	if len(names) <= few {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:few], ", ") + fmt.Sprintf(" and %d more", len(names)-few)
}

// humanBytes formats n bytes for notes: "64 MiB", "1.5 KiB", "12 bytes".
func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<20))) + " MiB"
	case n >= 1<<10:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<10))) + " KiB"
	}
	return fmt.Sprintf("%d bytes", n)
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }
