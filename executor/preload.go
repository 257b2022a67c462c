package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kernelbox/kernelbox/jupyter"
)

// PreloadError is a template's preload (or its environment set-up) that failed in
// a fresh kernel: the kernel is not handed out, and the start fails with this error.
type PreloadError struct {
	Template string
	// Ename, Evalue and Traceback are the error's, as the kernel reported it
	// (ANSI colours removed). A traceback over 4 KiB keeps its first 1.5 KiB (the
	// preload's own lines) and its last 2.5 KiB (the frame that raised), with a
	// note of what was cut between them.
	Ename, Evalue string
	Traceback     string
	// Output is what the preload printed before it failed (its last 4 KiB).
	Output string
}

func (e *PreloadError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "template %q: the preload cell failed in a fresh kernel: %s: %s", e.Template, e.Ename, e.Evalue)
	if e.Traceback != "" {
		b.WriteString("\ntraceback:\n" + e.Traceback)
	}
	if e.Output != "" {
		b.WriteString("\noutput before the error:\n" + e.Output)
	}
	return b.String()
}

// preloadKeep bounds the traceback and output a PreloadError keeps.
const preloadKeep = 4 << 10

// PreloadTimeoutError is a template's preload (with its environment set-up) that
// ran past its preload timeout (Template.PreloadTimeout) in a fresh kernel: the
// kernel is stopped, not handed out, and the start fails with this error.
type PreloadTimeoutError struct {
	Template string
	// Timeout is the bound that ran out.
	Timeout time.Duration
	// Output is what the preload printed before it was stopped (its last 4 KiB).
	Output string
}

func (e *PreloadTimeoutError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "template %q: preload timed out after %s (the template's preload_timeout); the kernel was stopped", e.Template, e.Timeout)
	if e.Output != "" {
		b.WriteString("\noutput before it was stopped:\n" + e.Output)
	}
	return b.String()
}

// prepare makes a fresh kernel what its template promises: the environment (when
// the backend does not set it) and the preload cell. It runs after every start and
// every restart (the interpreter is new). Silent executions: the session's first
// call still gets execution count 1, and nothing is added to its history. Both
// together are bounded by the template's PreloadTimeout, within ctx (the start's
// own bounds).
func (e *Executor) prepare(ctx context.Context, k *kernel) error {
	t := k.tmpl
	if t == nil {
		return nil
	}
	var cells []string
	if k.envByCode && len(t.Env) > 0 {
		lang := strings.ToLower(k.language)
		if lang == "" {
			lang = "python" // as python() takes a kernel that did not say
		}
		code, err := envCode(lang, t.Env)
		if err != nil {
			return fmt.Errorf("template %q: env on the %s backend: %w", t.Name, e.Backend(), err)
		}
		cells = append(cells, code)
	}
	if strings.TrimSpace(t.Preload) != "" {
		cells = append(cells, t.Preload)
	}
	if len(cells) == 0 {
		return nil
	}
	bound := t.PreloadTimeout
	if bound <= 0 {
		bound = e.opts.PreloadTimeout
	}
	timedOut := &PreloadTimeoutError{Template: t.Name, Timeout: bound}
	pctx, cancel := context.WithTimeoutCause(ctx, bound, timedOut)
	defer cancel()
	t0 := time.Now()
	for _, code := range cells {
		out, err := runSilent(pctx, k.conn, t.Name, code)
		if err == nil {
			continue
		}
		var pe *PreloadError
		switch {
		case errors.As(err, &pe):
			return err
		case context.Cause(pctx) == timedOut && ctx.Err() == nil:
			timedOut.Output = out
			return timedOut
		case ctx.Err() != nil:
			return fmt.Errorf("template %q: preload stopped after %s: %w", t.Name, time.Since(t0).Round(time.Millisecond), err)
		}
		// The kernel died, or its connection or server went away, while it ran
		// the preload: say why when the placement knows (docker names an OOM
		// kill and the memory limit). Bounded: a placement that does not answer
		// must not hold the start up.
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), diagnoseWait)
		cause := k.diagnose(dctx)
		dcancel()
		if cause == "" {
			cause = err.Error() + "; no cause known (common causes: os._exit, a crash in native code, running out of memory"
			if t.Memory > 0 {
				cause += fmt.Sprintf(": the template's memory limit is %s", formatMiB(t.Memory))
			}
			cause += ")"
		}
		what := "the kernel died"
		if !errors.Is(err, jupyter.ErrKernelDied) {
			what = "the kernel's connection broke"
		}
		return &preloadDiedError{msg: fmt.Sprintf("template %q: %s while it ran the preload: %s", t.Name, what, cause), err: err}
	}
	return nil
}

// preloadDiedError is a kernel that died while it ran its template's preload: its
// message is the placement's diagnosis, and it wraps the connection's error
// (jupyter.ErrKernelDied, say).
type preloadDiedError struct {
	msg string
	err error
}

func (e *preloadDiedError) Error() string { return e.msg }
func (e *preloadDiedError) Unwrap() error { return e.err }

// diagnoseWait bounds asking a placement why a kernel died.
const diagnoseWait = 5 * time.Second

// formatMiB writes a memory size as "256 MiB" or "1.5 GiB".
func formatMiB(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// runSilent runs code silently and turns an error in it into a PreloadError. It
// returns what the code printed (its last 4 KiB) with any error.
func runSilent(ctx context.Context, conn *jupyter.Conn, tmpl, code string) (string, error) {
	ex, err := conn.Execute(ctx, jupyter.ExecuteRequest{Code: code, Silent: true})
	if err != nil {
		return "", err
	}
	defer ex.Close()
	var out strings.Builder
	printed := func() string { return tail(StripANSI(out.String()), preloadKeep) }
	for {
		m, err := ex.Next(ctx)
		if err != nil {
			if err == io.EOF {
				break
			}
			return printed(), err
		}
		if m.Type() == "stream" {
			var sc jupyter.StreamContent
			if m.DecodeContent(&sc) == nil {
				out.WriteString(sc.Text)
			}
			if out.Len() > 4*preloadKeep {
				// Only the tail is kept: a preload that prints without
				// end must not grow kernelbox's memory.
				kept := out.String()[out.Len()-2*preloadKeep:]
				out.Reset()
				out.WriteString(kept)
			}
		}
	}
	r, err := ex.Reply()
	if err != nil {
		return printed(), err
	}
	if r.Status == "ok" {
		return printed(), nil
	}
	pe := &PreloadError{Template: tmpl, Ename: r.Ename, Evalue: r.Evalue,
		Traceback: ends(StripANSI(strings.Join(r.Traceback, "\n")), preloadKeep*3/8, preloadKeep*5/8),
		Output:    printed()}
	if pe.Ename == "" {
		pe.Ename = "status " + r.Status
	}
	return pe.Output, pe
}

// tail returns the last n bytes of s (or a few fewer, not to split a character).
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return "…" + s[i:]
}

// ends returns s when it is at most head+tail bytes long, else its first head and
// last tail bytes (or a few fewer, not to split a character) with a note of what was
// cut between them: a traceback's first frames are the preload's own lines, its last
// the one that raised, and a library's frames in between matter least.
func ends(s string, head, tail int) string {
	if len(s) <= head+tail {
		return s
	}
	h, t := head, len(s)-tail
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return s[:h] + fmt.Sprintf("\n[… %d bytes cut …]\n", t-h) + s[t:]
}

// envCode returns code that sets env in a kernel of language lang. Names are checked
// (checkEnv); values travel as JSON string literals, which Python and R both read.
func envCode(lang string, env map[string]string) (string, error) {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	switch lang {
	case "python":
		b, err := json.Marshal(env)
		if err != nil {
			return "", err
		}
		return "__import__('os').environ.update(" + string(b) + ")", nil
	case "r":
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			v, err := json.Marshal(env[k])
			if err != nil {
				return "", err
			}
			parts = append(parts, "`"+k+"` = "+string(v))
		}
		return "invisible(Sys.setenv(" + strings.Join(parts, ", ") + "))", nil
	}
	return "", fmt.Errorf("cannot set environment variables in a %q kernel (Python and R only)", lang)
}
