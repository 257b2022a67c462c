package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/notebook"
	"github.com/kernelbox/kernelbox/permissions"
)

// runNotebookCmd executes a notebook's code cells in one local session and writes the
// executed notebook, as `jupyter nbconvert --execute` and papermill do.
func runNotebookCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseRunArgs(args, stderr)
	if err != nil {
		return err
	}
	return runNotebook(ctx, o, stdout, stderr)
}

// runNotebook runs the notebook o describes in a new engine, writes the executed
// notebook and prints the summary. Its error is the command's exit status.
func runNotebook(ctx context.Context, o *runOptions, stdout, stderr io.Writer) error {
	log, err := o.engine.logger(stderr)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	var approver permissions.Approver
	if o.in != "-" && stdinIsTerminal() {
		approver = &permissions.PromptApprover{In: os.Stdin, Out: stderr}
	}
	en, err := o.engine.build(ctx, log, approver)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	defer func() {
		if err := en.close(); err != nil {
			log.Warn("shutdown", "err", err)
		}
	}()

	session := runSessionID(o.in)
	p := &progress{w: stderr, quiet: o.quiet}
	rep, runErr := notebook.Run(ctx, en.exec, o.nb, o.runOptions(session, p))
	if rep == nil {
		if errors.Is(runErr, notebook.ErrInvalidParameter) {
			return exitCode{2, "-p " + runErr.Error()}
		}
		return exitCode{2, runErr.Error()}
	}
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_ = en.exec.CloseSession(cctx, session) // its artifacts stay
	cancel()

	if err := writeNotebook(o.nb, o.out, stdout); err != nil {
		return exitCode{2, err.Error()}
	}
	p.summary(rep, o.out, filepath.Join(en.ws.ArtifactsDir(), session))
	switch {
	case runErr != nil && ctx.Err() != nil:
		return exitCode{130, "interrupted; the notebook was written as far as it ran"}
	case runErr != nil:
		return exitCode{2, runErr.Error()}
	case rep.Status != api.StatusOK:
		return exitCode{1, ""}
	}
	return nil
}

// runOptions returns the notebook.RunOptions of the run in session, reporting each
// cell to p.
func (o *runOptions) runOptions(session string, p *progress) notebook.RunOptions {
	codeCells := 0
	return notebook.RunOptions{
		SessionID:   session,
		Parameters:  o.params,
		Inputs:      o.inputs,
		CellTimeout: o.cellTimeout,
		AllowErrors: o.allowErrors,
		OnCell: func(c notebook.CellResult) {
			if codeCells == 0 { // the first call: parameters are injected by now
				for _, cell := range o.nb.Cells {
					if cell.Type == "code" {
						codeCells++
					}
				}
			}
			p.cell(c, codeCells)
		},
	}
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

// unsafeSessionChars are the runs of characters a session id may not hold (see
// api.ValidSessionID); runSessionID replaces each with "_".
var unsafeSessionChars = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// maxRunStem bounds the notebook's part of a run's session id, so that
// "run-" + stem + "-" + 8 hex digits stays within api.ValidSessionID's 64.
const maxRunStem = 40

// runSessionID names the run's session after the notebook, so that its artifacts
// directory is recognizable: run-<name>-<random>. The id always satisfies
// api.ValidSessionID.
func runSessionID(in string) string {
	stem := unsafeSessionChars.ReplaceAllString(strings.TrimSuffix(filepath.Base(in), ".ipynb"), "_")
	if in == "-" || stem == "" {
		stem = "stdin"
	}
	if len(stem) > maxRunStem {
		stem = stem[:maxRunStem] // the stem is ASCII by now
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
	if c.Error != nil && c.Status != api.StatusOK {
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

func errorLine(e *api.ErrorInfo) string {
	if e.Evalue == "" {
		return e.Ename
	}
	return e.Ename + ": " + e.Evalue
}
