package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/notebook"
	"github.com/kernelbox/kernelbox/permissions"
)

// runNotebookCmd executes a notebook's code cells in one local session and writes the
// executed notebook, as `jupyter nbconvert --execute` and papermill do.
func runNotebookCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	var ef engineFlags
	ef.register(fs, "local")
	out := fs.String("o", "", "output notebook; - for stdout (default: IN.out.ipynb next to IN, or stdout when IN is -)")
	var params, inputs multiFlag
	fs.Var(&params, "p", "NAME=VALUE: inject a parameter, papermill style (repeatable); VALUE is JSON, a number, true/false/None, or else a string")
	fs.Var(&inputs, "input", "host file to stage as inputs/<basename> before the first cell (repeatable)")
	cellTimeout := fs.Duration("cell-timeout", 0, "timeout of each cell (default: --timeout)")
	allowErrors := fs.Bool("allow-errors", false, "keep running after a cell raises (the run still exits 1); cells tagged raises-exception may always raise")
	quiet := fs.Bool("quiet", false, "do not print a progress line per cell")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: kernelbox run [flags] IN.ipynb\n\nRuns the notebook's code cells in order in one kernel and writes the executed notebook.\nExit status: 0 ok, 1 a cell failed (the output notebook is still written), 2 bad usage or input.\nFlags:")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitCode{2, "run takes one notebook: kernelbox run [flags] IN.ipynb"}
	}
	in := pos[0]
	nb, err := readNotebook(in)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	var ps []notebook.Parameter
	for _, a := range params {
		p, err := notebook.ParseAssignment(a)
		if err != nil {
			return exitCode{2, "-p " + err.Error()}
		}
		ps = append(ps, p)
	}
	outPath := *out
	if outPath == "" {
		outPath = defaultOutput(in)
	}
	if outPath != "-" {
		if fi, err := os.Stat(filepath.Dir(outPath)); err != nil || !fi.IsDir() {
			return exitCode{2, fmt.Sprintf("-o %s: the directory %s does not exist", outPath, filepath.Dir(outPath))}
		}
	}
	// The permission policy resolves paths itself; absolute paths make what it
	// checks, and what the messages say, unambiguous.
	for i, p := range inputs {
		if abs, err := filepath.Abs(p); err == nil {
			inputs[i] = abs
		}
	}

	log, err := ef.logger(stderr)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	var approver permissions.Approver
	if in != "-" && stdinIsTerminal() {
		approver = &permissions.PromptApprover{In: os.Stdin, Out: stderr}
	}
	en, err := ef.build(ctx, log, approver)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	defer func() {
		if err := en.close(); err != nil {
			log.Warn("shutdown", "err", err)
		}
	}()

	session := runSessionID(in)
	codeCells := 0
	p := &progress{w: stderr, quiet: *quiet}
	rep, runErr := notebook.Run(ctx, en.exec, nb, notebook.RunOptions{
		SessionID:   session,
		Parameters:  ps,
		Inputs:      inputs,
		CellTimeout: *cellTimeout,
		AllowErrors: *allowErrors,
		OnCell: func(c notebook.CellResult) {
			if codeCells == 0 { // the first call: parameters are injected by now
				for _, cell := range nb.Cells {
					if cell.Type == "code" {
						codeCells++
					}
				}
			}
			p.cell(c, codeCells)
		},
	})
	if rep == nil {
		if errors.Is(runErr, notebook.ErrInvalidParameter) {
			return exitCode{2, "-p " + runErr.Error()}
		}
		return exitCode{2, runErr.Error()}
	}
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_ = en.exec.CloseSession(cctx, session) // its artifacts stay
	cancel()

	if err := writeNotebook(nb, outPath, stdout); err != nil {
		return exitCode{2, err.Error()}
	}
	p.summary(rep, outPath, filepath.Join(en.ws.ArtifactsDir(), session))
	switch {
	case runErr != nil && ctx.Err() != nil:
		return exitCode{130, "interrupted; the notebook was written as far as it ran"}
	case runErr != nil:
		return exitCode{2, runErr.Error()}
	case rep.Status != notebook.StatusOK:
		return exitCode{1, ""}
	}
	return nil
}

// parseInterspersed parses flags that may come before or after the positional
// arguments (`kernelbox run in.ipynb -o out.ipynb`), which package flag alone does
// not allow, and returns the positional ones. Everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// readNotebook reads a notebook file, or stdin for "-".
func readNotebook(path string) (*notebook.Notebook, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	nb, err := notebook.Read(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return nb, nil
}

// defaultOutput is IN.out.ipynb next to IN (IN without its .ipynb), or stdout for
// a notebook read from stdin.
func defaultOutput(in string) string {
	if in == "-" {
		return "-"
	}
	return strings.TrimSuffix(in, ".ipynb") + ".out.ipynb"
}

// writeNotebook writes nb to path atomically (a temp file renamed over it), or to
// stdout for "-".
func writeNotebook(nb *notebook.Notebook, path string, stdout io.Writer) error {
	b, err := nb.Encode()
	if err != nil {
		return fmt.Errorf("encode notebook: %w", err)
	}
	if path == "-" {
		_, err := stdout.Write(b)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write notebook: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing left to remove
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write notebook: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write notebook: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write notebook: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write notebook: %w", err)
	}
	return nil
}

var unsafeSessionChars = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// runSessionID names the run's session after the notebook, so that its artifacts
// directory is recognizable: run-<name>-<random>.
func runSessionID(in string) string {
	stem := unsafeSessionChars.ReplaceAllString(strings.TrimSuffix(filepath.Base(in), ".ipynb"), "_")
	if in == "-" || stem == "" {
		stem = "stdin"
	}
	if len(stem) > 40 {
		stem = stem[:40]
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "run-" + stem + "-" + hex.EncodeToString(b[:])
}

// progress prints one line per code cell and the final summary to stderr.
type progress struct {
	w     io.Writer
	quiet bool
	n     int
}

func (p *progress) cell(c notebook.CellResult, total int) {
	p.n++
	if p.quiet {
		return
	}
	line := fmt.Sprintf("[%d/%d] cell %d %s", p.n, total, c.Index, c.Status)
	switch {
	case c.Status == notebook.StatusSkipped:
		line += " (" + c.Skipped + ")"
	default:
		line += fmt.Sprintf(" %.2fs", c.Duration.Seconds())
	}
	if c.Error != nil && c.Status != notebook.StatusOK {
		line += ": " + errorLine(c.Error)
		if c.ExpectedError {
			line += " (expected: raises-exception)"
		}
	}
	if c.Note != "" {
		line += " [" + c.Note + "]"
	}
	fmt.Fprintln(p.w, line)
}

func (p *progress) summary(rep *notebook.Report, out, artifacts string) {
	ran, skipped := 0, 0
	for _, c := range rep.Cells {
		if c.Status == notebook.StatusSkipped {
			skipped++
		} else {
			ran++
		}
	}
	if rep.FailedCell != nil && rep.Error != nil {
		fmt.Fprintf(p.w, "\ncell %d failed (%s): %s\n", *rep.FailedCell, rep.Status, errorLine(rep.Error))
		for _, l := range rep.Error.Traceback {
			fmt.Fprintln(p.w, "  "+strings.ReplaceAll(l, "\n", "\n  "))
		}
		fmt.Fprintln(p.w)
	}
	where := out
	if out == "-" {
		where = "stdout"
	}
	msg := fmt.Sprintf("status %s: %d cells ran, %d skipped; wrote %s", rep.Status, ran, skipped, where)
	if len(rep.Artifacts) > 0 {
		msg += fmt.Sprintf("; %d artifacts in %s", len(rep.Artifacts), artifacts)
	}
	fmt.Fprintln(p.w, msg)
}

func errorLine(e *executor.ErrorInfo) string {
	if e.Evalue == "" {
		return e.Ename
	}
	return e.Ename + ": " + e.Evalue
}
