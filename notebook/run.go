package notebook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// A cell, and a whole run, end with one of the statuses of a call (api.Status:
// api.StatusOK, api.StatusError, api.StatusTimeout, api.StatusKernelDied) or,
// for a cell only, StatusSkipped. For a run, api.StatusError means a cell raised
// and the error was not allowed (or was allowed by RunOptions.AllowErrors, which
// lets the run go on but still reports it).

// StatusSkipped is the status of a cell that is empty or tagged skip-execution
// (cells only).
const StatusSkipped api.Status = "skipped"

// RunOptions configures Run. The zero value runs the notebook as it is in a fresh
// session, stopping at the first error.
type RunOptions struct {
	// SessionID is the executor session to run in. Defaults to a fresh session
	// that is closed (its files deleted, its artifacts kept) when Run returns; a
	// session named here is left open.
	SessionID string

	// Parameters are injected as a cell tagged "injected-parameters"; see
	// Notebook.InjectParameters.
	Parameters []Parameter

	// Inputs are host files staged into the session's inputs/ directory with the
	// first cell that runs.
	Inputs []string

	// CellTimeout bounds each cell. Defaults to the executor's default timeout
	// (and is capped at its maximum).
	CellTimeout time.Duration

	// AllowErrors runs on past cells that raise. Cells tagged "raises-exception"
	// may raise without it. Timeouts and kernel deaths always stop the run.
	AllowErrors bool

	// Template is the template of the run's session when Run makes it (a fresh
	// session, or one named in SessionID that does not exist yet). Defaults to the
	// one the notebook's kernelspec name chooses (api.TemplateForKernel: a
	// template's name, one of its kernel_names, or "python3" for the default
	// Python template), else the executor's default.
	Template string

	// OnCell, when set, is called after each code cell (run or skipped), on
	// Run's goroutine, for progress reports.
	OnCell func(CellResult)
}

// Report is the outcome of a run. The notebook itself was updated in place.
type Report struct {
	SessionID string `json:"session_id"`
	// Status is ok, error, timeout or kernel_died.
	Status api.Status `json:"status"`
	// FailedCell is the index (in Notebook.Cells, after parameter injection) of
	// the first cell whose failure set Status, or nil.
	FailedCell *int `json:"failed_cell"`
	// Error describes that failure (the traceback without ANSI colors), or nil.
	Error *api.ErrorInfo `json:"error"`
	// Cells has one entry per code cell that was run or skipped, in order.
	Cells []CellResult `json:"cells"`
	// Artifacts are the files the cells wrote to outputs/ and their rich outputs,
	// copied to the artifacts directory.
	Artifacts []api.Artifact `json:"artifacts"`
}

// CellResult is the outcome of one code cell.
type CellResult struct {
	// Index is the cell's index in Notebook.Cells.
	Index  int        `json:"index"`
	Status api.Status `json:"status"`
	// Skipped says why a skipped cell was skipped: "empty" or "skip-execution".
	Skipped string `json:"skipped,omitempty"`
	// ExpectedError is set when the cell raised and was tagged raises-exception.
	ExpectedError  bool           `json:"expected_error,omitempty"`
	ExecutionCount int            `json:"execution_count,omitempty"`
	Error          *api.ErrorInfo `json:"error,omitempty"`
	// Note reports truncated output or lost state, from the executor.
	Note       string        `json:"note,omitempty"`
	Duration   time.Duration `json:"-"`
	DurationMS int64         `json:"duration_ms"`
}

// Run executes nb's code cells in order in one session of e and writes each cell's
// outputs and execution_count into nb, as nbclient does. See the package comment for
// which cells run and when the run stops.
//
// The error is non-nil when the run could not go on for a reason other than the
// code. Found before anything runs, with a nil report: a negative timeout, a bad
// parameter (ErrInvalidParameter), a notebook in another language than Python
// (ErrInvalid). Found on the way, with the report of the cells run so far: a call the
// executor refused (api.ErrInvalidRequest, ErrDenied, ErrDisabled, ...), or ctx
// ending.
func Run(ctx context.Context, e *executor.Executor, nb *Notebook, opts RunOptions) (*Report, error) {
	if err := prepare(nb, opts); err != nil {
		return nil, err
	}
	session := opts.SessionID
	if session == "" {
		session = "nb-" + uuid.NewString()
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = e.CloseSession(cctx, session)
		}()
	}
	if opts.Template == "" {
		opts.Template = templateFor(e, nb, opts.SessionID)
	}
	r := &runner{
		e: e, session: session, opts: &opts, inputs: opts.Inputs,
		b:   &outputBuilder{nb: nb},
		rep: &Report{SessionID: session, Status: api.StatusOK, Cells: []CellResult{}, Artifacts: []api.Artifact{}},
	}
	for i, c := range nb.Cells {
		if c.Type != "code" {
			continue
		}
		stop, err := r.cell(ctx, i, c)
		if err != nil {
			return r.rep, err
		}
		if stop {
			break
		}
	}
	return r.rep, nil
}

// prepare checks what can be checked before anything runs, and injects the
// parameters.
func prepare(nb *Notebook, opts RunOptions) error {
	if opts.CellTimeout < 0 {
		return errors.New("run notebook: the cell timeout must not be negative")
	}
	if lang := nb.Language(); lang != "" && !strings.EqualFold(lang, "python") {
		return invalidf("the notebook's language is %s: kernelbox runs Python kernels only", lang)
	}
	return nb.InjectParameters(opts.Parameters)
}

// templateFor returns the template the notebook's kernelspec name chooses for a
// session Run makes, or "" (the default, or the existing session's own).
func templateFor(e *executor.Executor, nb *Notebook, session string) string {
	name := nb.KernelName()
	if name == "" {
		return ""
	}
	if session != "" {
		if _, err := e.Session(session); err == nil {
			return "" // it keeps its own template
		}
	}
	t, _ := api.TemplateForKernel(e.TemplateInfos(), name)
	return t
}

// runner is one Run in progress.
type runner struct {
	e       *executor.Executor
	session string
	opts    *RunOptions
	inputs  []string // staged with the first cell that runs, then nil
	b       *outputBuilder
	rep     *Report
}

// cell runs (or skips) code cell i, records its outcome in the report and the
// notebook, and reports whether the run stops after it. The error says why the
// run could not go on: the executor refused the cell, or ctx ended.
func (r *runner) cell(ctx context.Context, i int, c *Cell) (stop bool, err error) {
	cr := CellResult{Index: i}
	if cr.Skipped = skipReason(c); cr.Skipped != "" {
		cr.Status = StatusSkipped
		r.rep.Cells = append(r.rep.Cells, cr)
		r.opts.progress(cr)
		return false, nil
	}
	start := time.Now()
	r.b.start(i)
	res, err := r.e.ExecuteStream(ctx, api.Request{
		SessionID: r.session,
		Template:  r.opts.Template,
		Code:      c.Source,
		Inputs:    r.inputs,
		Timeout:   r.opts.CellTimeout,
	}, r.b.event)
	cr.Duration = time.Since(start)
	cr.DurationMS = cr.Duration.Milliseconds()
	if err != nil {
		r.rep.fail(i, &api.ErrorInfo{Ename: "NotRun", Evalue: err.Error()}, api.StatusError)
		return true, fmt.Errorf("run cell %d: %w", i, err)
	}
	r.inputs = nil
	c.Outputs = r.b.outs
	c.ExecutionCount = nil
	if res.ExecutionCount > 0 {
		n := res.ExecutionCount
		c.ExecutionCount = &n
	}
	cr.ExecutionCount = res.ExecutionCount
	cr.Error = res.Error
	cr.Note = note(res)
	r.rep.Artifacts = append(r.rep.Artifacts, res.Artifacts...)
	stop = r.settle(&cr, c, res)
	r.rep.Cells = append(r.rep.Cells, cr)
	r.opts.progress(cr)
	if err := ctx.Err(); err != nil {
		return true, fmt.Errorf("run notebook: stopped after cell %d: %w", i, err)
	}
	return stop, nil
}

// skipReason says why cell c is not run ("empty" or "skip-execution"), or "".
func skipReason(c *Cell) string {
	switch {
	case strings.TrimSpace(c.Source) == "":
		return "empty"
	case c.HasTag(TagSkipExecution):
		return TagSkipExecution
	}
	return ""
}

// settle sets the status of cell cr.Index from the executor's result, records a
// failure in the report, and reports whether it stops the run.
func (r *runner) settle(cr *CellResult, c *Cell, res *api.Result) (stop bool) {
	i := cr.Index
	switch res.Status {
	case api.StatusOK:
		cr.Status = api.StatusOK
	case api.StatusError:
		cr.Status = api.StatusError
		switch {
		case c.HasTag(TagRaisesException):
			cr.ExpectedError = true
		case r.opts.AllowErrors:
			r.rep.fail(i, res.Error, api.StatusError)
		default:
			r.rep.fail(i, res.Error, api.StatusError)
			stop = true
		}
	case api.StatusTimeout:
		cr.Status = api.StatusTimeout
		r.rep.fail(i, res.Error, api.StatusTimeout)
		stop = true
	default: // kernel_died; denied comes with an error, handled above
		cr.Status = api.StatusKernelDied
		r.rep.fail(i, res.Error, api.StatusKernelDied)
		stop = true
	}
	return stop
}

func (o *RunOptions) progress(cr CellResult) {
	if o.OnCell != nil {
		o.OnCell(cr)
	}
}

// fail records the first failure of the run.
func (r *Report) fail(cell int, info *api.ErrorInfo, status api.Status) {
	if r.FailedCell != nil {
		return
	}
	r.Status, r.FailedCell, r.Error = status, &cell, info
}

func note(res *api.Result) string {
	var notes []string
	if res.StateLost {
		notes = append(notes, "state lost: the kernel was restarted")
	}
	if res.Truncated {
		notes = append(notes, "output truncated: "+res.TruncationNote)
	}
	return strings.Join(notes, "; ")
}
