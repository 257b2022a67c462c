package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/kernelbox/kernelbox/api"
)

// Limits on what a step prints; the rest is summarised.
const (
	maxCodeLines   = 16
	maxOutputLines = 32
	wrapWidth      = 100
)

// printer writes the demo's transcript. It is used by one goroutine at a time.
type printer struct {
	w io.Writer
}

func (p *printer) line(s string) { fmt.Fprintln(p.w, s) }
func (p *printer) blank()        { fmt.Fprintln(p.w) }

func (p *printer) title(s string) {
	p.line(s)
	p.line(strings.Repeat("=", len(s)))
}

// field prints "name: value", continuing value's own lines under it.
func (p *printer) field(name, value string) {
	fmt.Fprintf(p.w, "%-10s %s\n", name+":", strings.ReplaceAll(value, "\n", "\n           "))
}

// say prints an agent's message, wrapped.
func (p *printer) say(who, msg string) {
	p.line(who + ":")
	for _, l := range wrap(msg, wrapWidth-4) {
		p.line("    " + l)
	}
}

// note prints a remark under the current step.
func (p *printer) note(msg string) {
	for i, l := range wrap(msg, wrapWidth-6) {
		if i == 0 {
			p.line("      → " + l)
		} else {
			p.line("        " + l)
		}
	}
}

// stepStart prints the start of a progress line, such as "[2/6] data_analyst:
// inspect the table ... "; stepEnd finishes it.
func (p *printer) stepStart(tag, who, title string) {
	fmt.Fprintf(p.w, "[%s] %s: %s ... ", tag, who, title)
}

// stepEnd finishes the progress line with the outcome, then shows the call: its
// arguments, code, output, notes and artifacts. source names where the code came
// from, if anywhere.
func (p *printer) stepEnd(args toolArgs, o outcome, source string) {
	status := o.status()
	switch {
	case o.res != nil:
		status += " (" + duration(o.res.DurationMS) + ")"
	case o.denied != nil:
		status += " (" + duration(o.ms) + ")"
	}
	p.line(status)

	inputs, _ := json.Marshal(args.Inputs)
	if args.Inputs == nil {
		inputs = []byte("[]")
	}
	fmt.Fprintf(p.w, "      %s(session_id=%q, inputs=%s)\n", toolName, args.SessionID, inputs)
	p.block("code", args.Code, maxCodeLines, source)

	switch {
	case o.denied != nil:
		for _, d := range o.denied {
			p.block("denied", strings.Join(wrap(d, wrapWidth-10), "\n"), maxOutputLines, "")
		}
		return
	case o.res == nil:
		p.block("refused", o.err.Error(), maxOutputLines, "")
		return
	}
	r := o.res
	out := r.Stdout + r.Stderr
	if r.Result != "" {
		out += r.Result + "\n"
	}
	if r.Error != nil && r.Status != api.StatusOK {
		if len(r.Error.Traceback) > 0 {
			out += strings.Join(r.Error.Traceback, "\n")
		} else {
			out += r.Error.Ename + ": " + r.Error.Evalue
		}
	}
	p.block("output", out, maxOutputLines, "")
	for _, n := range r.Notes {
		p.line("      note: " + n)
	}
	for _, a := range r.Artifacts {
		fmt.Fprintf(p.w, "      artifact: %s (%s, %s)\n", a.Name, size(a.Size), a.MIME)
	}
}

// block prints a labelled, indented block of at most max lines.
func (p *printer) block(label, text string, max int, source string) {
	text = strings.TrimRight(text, "\n")
	if text == "" {
		return
	}
	lines := strings.Split(text, "\n")
	p.line("      " + label + ":")
	for i, l := range lines {
		if i == max {
			more := fmt.Sprintf("        … %d more line%s", len(lines)-max, plural(len(lines)-max))
			if source != "" {
				more += " (examples/research_demo/cells/" + path.Base(source) + ")"
			}
			p.line(more)
			break
		}
		p.line("        │ " + l)
	}
}

func duration(ms int64) string {
	if ms < 1000 {
		return fmt.Sprintf("%d ms", ms)
	}
	return fmt.Sprintf("%.1f s", float64(ms)/1000)
}

func size(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.0f KB", float64(n)/1024)
}

// wrap breaks s into lines of at most width runes at spaces, keeping its own line
// breaks.
func wrap(s string, width int) []string {
	var out []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, w := range strings.Fields(para) {
			switch {
			case line == "":
				line = w
			case len([]rune(line))+1+len([]rune(w)) > width:
				out = append(out, line)
				line = w
			default:
				line += " " + w
			}
		}
		out = append(out, line)
	}
	return out
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
