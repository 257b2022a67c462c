package executor

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/jupyter"
)

var ansiPattern = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// StripANSI removes ANSI terminal escape sequences (the colors of IPython tracebacks).
func StripANSI(s string) string { return ansiPattern.ReplaceAllString(s, "") }

// collector turns a call's iopub messages into nbformat outputs, within caps, and
// forwards each as an Event. It is used by one goroutine.
type collector struct {
	maxStream  int
	maxOutputs int
	maxRich    int
	onEvent    func(api.Event)
	onComm     func(api.Event) // a comm message of the call (job.emitComm)

	outputs []api.Output
	// tail holds the text of the last output while stream messages extend it;
	// settle stores it in that output. (Appending to the output's string instead
	// copies all of it each time: a cell printing 4 MB in 10,000 flushed lines
	// took 7.7 s.)
	tail         strings.Builder
	streamBytes  int
	richBytes    int
	clearPending bool

	droppedStream  int64
	droppedOutputs int
	droppedRich    int64
	serverDropped  bool
}

func newCollector(o *Options, onEvent func(api.Event)) *collector {
	return &collector{
		maxStream:  o.MaxStreamBytes,
		maxOutputs: o.MaxOutputs,
		maxRich:    o.MaxRichBytes,
		onEvent:    onEvent,
	}
}

func (c *collector) emit(e api.Event) {
	if c.onEvent != nil {
		c.onEvent(e)
	}
}

// add handles one iopub message of the call, by its type; a type that is not
// an output, an output change or a comm is left out.
func (c *collector) add(m *jupyter.Message) {
	if m.Truncated {
		c.droppedStream += m.DroppedBytes
	}
	switch m.Type() {
	case "stream":
		c.stream(m)
	case "display_data", "execute_result":
		c.display(m)
	case "comm_open", "comm_msg", "comm_close":
		c.comm(m)
	case "update_display_data":
		c.updateDisplay(m)
	case "error":
		c.errorOutput(m)
	case "clear_output":
		c.clearOutput(m)
	}
}

// stream adds a stream message's text to stdout or stderr, within the cap.
func (c *collector) stream(m *jupyter.Message) {
	if c.streamBytes >= c.maxStream && !c.clearPending && len(m.Content) > 4096 {
		// Over the cap: count the text without decoding it (its JSON size,
		// which is close), so a flood costs no more memory than its messages.
		c.droppedStream += int64(len(m.Content))
		return
	}
	var s jupyter.StreamContent
	if m.DecodeContent(&s) != nil {
		return
	}
	if s.Name == "stderr" && (strings.HasPrefix(s.Text, "IOPub data rate exceeded") ||
		strings.HasPrefix(s.Text, "IOPub message rate exceeded")) {
		// The server's own note that it dropped output: there is no other
		// signal of it in the protocol.
		c.serverDropped = true
	}
	c.addStream(s.Name, s.Text)
}

// display adds a display_data or execute_result output, within the caps; one
// the reader truncated is counted as dropped.
func (c *collector) display(m *jupyter.Message) {
	var d jupyter.DisplayContent
	if m.DecodeContent(&d) != nil {
		return
	}
	out := api.Output{OutputType: m.Type(), Data: d.Data, Metadata: d.Metadata, DisplayID: displayID(d.Transient)}
	if m.Type() == "execute_result" {
		n := d.ExecutionCount
		out.ExecutionCount = &n
	}
	if m.Truncated {
		c.droppedOutputs++
		return
	}
	typ := "display"
	if m.Type() == "execute_result" {
		typ = "result"
	}
	if c.addRich(out) {
		c.emit(api.Event{Type: typ, Output: &out})
	}
}

// comm forwards a comm message of the call (a widget's) whole, or not at all.
func (c *collector) comm(m *jupyter.Message) {
	if !m.Truncated && c.onComm != nil {
		c.onComm(api.Event{Type: "comm", MsgType: m.Type(), Comm: m.Content})
	}
}

// updateDisplay replaces the data of the outputs with the message's display id.
func (c *collector) updateDisplay(m *jupyter.Message) {
	var d jupyter.DisplayContent
	if m.DecodeContent(&d) != nil {
		return
	}
	id := displayID(d.Transient)
	for i := range c.outputs {
		if id != "" && c.outputs[i].DisplayID == id {
			c.outputs[i].Data, c.outputs[i].Metadata = d.Data, d.Metadata
		}
	}
	out := api.Output{OutputType: "display_data", Data: d.Data, Metadata: d.Metadata, DisplayID: id}
	c.emit(api.Event{Type: "update_display", Output: &out})
}

// errorOutput adds the cell's error output (after a pending clear_output).
func (c *collector) errorOutput(m *jupyter.Message) {
	var e jupyter.ErrorContent
	if m.DecodeContent(&e) != nil {
		return
	}
	out := api.Output{OutputType: "error", Ename: e.Ename, Evalue: e.Evalue, Traceback: e.Traceback}
	c.applyClear()
	c.append(out)
	c.emit(api.Event{Type: "error", Output: &out})
}

// clearOutput clears the outputs now, or with wait at the next output.
func (c *collector) clearOutput(m *jupyter.Message) {
	var cl jupyter.ClearOutputContent
	_ = m.DecodeContent(&cl)
	if cl.Wait {
		c.clearPending = true
	} else {
		c.clear()
	}
	c.emit(api.Event{Type: "clear_output", Wait: cl.Wait})
}

func (c *collector) addStream(name, text string) {
	c.applyClear()
	room := c.maxStream - c.streamBytes
	if len(text) > room {
		keep := cutUTF8(text, max(room, 0))
		c.droppedStream += int64(len(text) - len(keep))
		text = keep
	}
	if text == "" {
		return
	}
	c.streamBytes += len(text)
	c.emit(api.Event{Type: "stream", Name: name, Text: text})
	if n := len(c.outputs); n > 0 && c.outputs[n-1].OutputType == "stream" && c.outputs[n-1].Name == name {
		if c.tail.Len() == 0 {
			c.tail.WriteString(c.outputs[n-1].Text)
		}
		c.tail.WriteString(text)
		return
	}
	c.append(api.Output{OutputType: "stream", Name: name, Text: text})
}

// addRich appends a display or result, unless it would pass the rich-data cap.
func (c *collector) addRich(out api.Output) bool {
	c.applyClear()
	size := 0
	for _, v := range out.Data {
		size += len(v)
	}
	if c.richBytes+size > c.maxRich {
		c.droppedRich += int64(size)
		return false
	}
	c.richBytes += size
	return c.append(out)
}

// settle stores the tail's text in the last output.
func (c *collector) settle() {
	if c.tail.Len() > 0 {
		c.outputs[len(c.outputs)-1].Text = c.tail.String()
		c.tail.Reset()
	}
}

func (c *collector) append(out api.Output) bool {
	c.settle()
	if len(c.outputs) >= c.maxOutputs {
		c.droppedOutputs++
		return false
	}
	c.outputs = append(c.outputs, out)
	return true
}

func (c *collector) applyClear() {
	if c.clearPending {
		c.clearPending = false
		c.clear()
	}
}

func (c *collector) clear() {
	c.tail.Reset()
	c.outputs = c.outputs[:0]
	c.streamBytes, c.richBytes = 0, 0
}

// truncation reports whether anything was dropped and a note saying what.
func (c *collector) truncation() (bool, string) {
	var notes []string
	if c.droppedStream > 0 {
		notes = append(notes, fmt.Sprintf("%d bytes of stdout/stderr dropped (limit %d bytes per call)", c.droppedStream, c.maxStream))
	}
	if c.droppedOutputs > 0 {
		notes = append(notes, fmt.Sprintf("%d outputs dropped (limit %d outputs per call)", c.droppedOutputs, c.maxOutputs))
	}
	if c.droppedRich > 0 {
		notes = append(notes, fmt.Sprintf("%d bytes of rich output dropped (limit %d bytes per call)", c.droppedRich, c.maxRich))
	}
	if c.serverDropped {
		notes = append(notes, "the Jupyter server dropped output (iopub rate limit exceeded)")
	}
	return len(notes) > 0, strings.Join(notes, "; ")
}

// collected is what a collector gathered, in the Result's shape.
type collected struct {
	outputs        []api.Output
	stdout, stderr string
	result         string         // the text/plain of the execute_result
	err            *api.ErrorInfo // from the last error output, or nil
	truncated      bool
	truncationNote string
}

// finish returns the collected outputs with the convenience fields.
func (c *collector) finish() collected {
	c.settle()
	out := collected{outputs: c.outputs}
	var stdout, stderr []string
	for _, o := range c.outputs {
		switch o.OutputType {
		case "stream":
			if o.Name == "stderr" {
				stderr = append(stderr, o.Text)
			} else {
				stdout = append(stdout, o.Text)
			}
		case "execute_result":
			out.result, _ = jsonText(o.Data["text/plain"])
		case "error":
			tb := make([]string, len(o.Traceback))
			for i, l := range o.Traceback {
				tb[i] = StripANSI(l)
			}
			out.err = &api.ErrorInfo{Ename: o.Ename, Evalue: o.Evalue, Traceback: tb}
		}
	}
	// One stream output (the usual case) is shared, not copied.
	out.stdout, out.stderr = strings.Join(stdout, ""), strings.Join(stderr, "")
	out.truncated, out.truncationNote = c.truncation()
	return out
}

func displayID(transient map[string]json.RawMessage) string {
	var id string
	if raw, ok := transient["display_id"]; ok {
		_ = json.Unmarshal(raw, &id)
	}
	return id
}

// jsonText decodes a mime bundle value that is a string or a list of strings.
func jsonText(raw json.RawMessage) (string, bool) {
	s, err := api.MultilineString(raw)
	return s, err == nil && len(raw) > 0
}

// cutUTF8 returns the longest prefix of s of at most n bytes that does not split a
// UTF-8 character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
