package notebook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/kernelbox/kernelbox/executor"
)

// Status is how a cell, or a whole run, ended.
type Status string

// The statuses of cells and runs.
const (
	// StatusOK: the cell ran without error (or every cell did).
	StatusOK Status = "ok"
	// StatusError: the cell raised. For a run: a cell raised and the error was
	// not allowed (or was allowed by RunOptions.AllowErrors, which lets the run
	// go on but still reports it).
	StatusError Status = "error"
	// StatusTimeout: the cell passed its timeout and was interrupted.
	StatusTimeout Status = "timeout"
	// StatusKernelDied: the kernel died while running the cell.
	StatusKernelDied Status = "kernel_died"
	// StatusSkipped: the cell is empty or tagged skip-execution (cells only).
	StatusSkipped Status = "skipped"
)

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

	// OnCell, when set, is called after each code cell (run or skipped), on
	// Run's goroutine, for progress reports.
	OnCell func(CellResult)
}

// Report is the outcome of a run. The notebook itself was updated in place.
type Report struct {
	SessionID string `json:"session_id"`
	// Status is ok, error, timeout or kernel_died.
	Status Status `json:"status"`
	// FailedCell is the index (in Notebook.Cells, after parameter injection) of
	// the first cell whose failure set Status, or nil.
	FailedCell *int `json:"failed_cell"`
	// Error describes that failure (the traceback without ANSI colors), or nil.
	Error *executor.ErrorInfo `json:"error"`
	// Cells has one entry per code cell that was run or skipped, in order.
	Cells []CellResult `json:"cells"`
	// Artifacts are the files the cells wrote to outputs/ and their rich outputs,
	// copied to the artifacts directory.
	Artifacts []executor.Artifact `json:"artifacts"`
}

// CellResult is the outcome of one code cell.
type CellResult struct {
	// Index is the cell's index in Notebook.Cells.
	Index  int    `json:"index"`
	Status Status `json:"status"`
	// Skipped says why a skipped cell was skipped: "empty" or "skip-execution".
	Skipped string `json:"skipped,omitempty"`
	// ExpectedError is set when the cell raised and was tagged raises-exception.
	ExpectedError  bool                `json:"expected_error,omitempty"`
	ExecutionCount int                 `json:"execution_count,omitempty"`
	Error          *executor.ErrorInfo `json:"error,omitempty"`
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
// executor refused (executor.ErrInvalidRequest, ErrDenied, ErrDisabled, ...), or ctx
// ending.
func Run(ctx context.Context, e *executor.Executor, nb *Notebook, opts RunOptions) (*Report, error) {
	if opts.CellTimeout < 0 {
		return nil, errors.New("run notebook: the cell timeout must not be negative")
	}
	if lang := nb.Language(); lang != "" && !strings.EqualFold(lang, "python") {
		return nil, invalidf("the notebook's language is %s: kernelbox runs Python kernels only", lang)
	}
	if err := nb.InjectParameters(opts.Parameters); err != nil {
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
	rep := &Report{SessionID: session, Status: StatusOK, Cells: []CellResult{}, Artifacts: []executor.Artifact{}}
	b := &outputBuilder{nb: nb}
	inputs := opts.Inputs
	for i, c := range nb.Cells {
		if c.Type != "code" {
			continue
		}
		cr := CellResult{Index: i}
		switch {
		case strings.TrimSpace(c.Source) == "":
			cr.Status, cr.Skipped = StatusSkipped, "empty"
		case c.HasTag(TagSkipExecution):
			cr.Status, cr.Skipped = StatusSkipped, TagSkipExecution
		}
		if cr.Status == StatusSkipped {
			rep.Cells = append(rep.Cells, cr)
			opts.progress(cr)
			continue
		}
		start := time.Now()
		b.start(i)
		res, err := e.ExecuteStream(ctx, executor.Request{
			SessionID: session,
			Code:      c.Source,
			Inputs:    inputs,
			Timeout:   opts.CellTimeout,
		}, b.event)
		cr.Duration = time.Since(start)
		cr.DurationMS = cr.Duration.Milliseconds()
		if err != nil {
			rep.fail(i, &executor.ErrorInfo{Ename: "NotRun", Evalue: err.Error()}, StatusError)
			return rep, fmt.Errorf("run cell %d: %w", i, err)
		}
		inputs = nil
		c.Outputs = b.outs
		c.ExecutionCount = nil
		if res.ExecutionCount > 0 {
			n := res.ExecutionCount
			c.ExecutionCount = &n
		}
		cr.ExecutionCount = res.ExecutionCount
		cr.Error = res.Error
		cr.Note = note(res)
		rep.Artifacts = append(rep.Artifacts, res.Artifacts...)

		stop := false
		switch res.Status {
		case executor.StatusOK:
			cr.Status = StatusOK
		case executor.StatusError:
			cr.Status = StatusError
			switch {
			case c.HasTag(TagRaisesException):
				cr.ExpectedError = true
			case opts.AllowErrors:
				rep.fail(i, res.Error, StatusError)
			default:
				rep.fail(i, res.Error, StatusError)
				stop = true
			}
		case executor.StatusTimeout:
			cr.Status = StatusTimeout
			rep.fail(i, res.Error, StatusTimeout)
			stop = true
		default: // kernel_died; denied comes with an error, handled above
			cr.Status = StatusKernelDied
			rep.fail(i, res.Error, StatusKernelDied)
			stop = true
		}
		rep.Cells = append(rep.Cells, cr)
		opts.progress(cr)
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("run notebook: stopped after cell %d: %w", i, err)
		}
		if stop {
			break
		}
	}
	return rep, nil
}

func (o *RunOptions) progress(cr CellResult) {
	if o.OnCell != nil {
		o.OnCell(cr)
	}
}

// fail records the first failure of the run.
func (r *Report) fail(cell int, info *executor.ErrorInfo, status Status) {
	if r.FailedCell != nil {
		return
	}
	r.Status, r.FailedCell, r.Error = status, &cell, info
}

func note(res *executor.Result) string {
	var notes []string
	if res.StateLost {
		notes = append(notes, "state lost: the kernel was restarted")
	}
	if res.Truncated {
		notes = append(notes, "output truncated: "+res.TruncationNote)
	}
	return strings.Join(notes, "; ")
}
