package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/notebook"
)

// NotebookRunBody is the JSON body of POST /v1/notebooks/run.
type NotebookRunBody struct {
	// Notebook is an nbformat v4 notebook (required).
	Notebook json.RawMessage `json:"notebook"`
	// Parameters is a JSON object of values to inject papermill-style, in its
	// key order.
	Parameters json.RawMessage `json:"parameters,omitempty"`
	// Inputs are host paths staged into inputs/ before the first cell.
	Inputs []string `json:"inputs,omitempty"`
	// SessionID runs the notebook in that session and leaves it open; by default a
	// fresh session is used and closed afterwards (its artifacts stay).
	SessionID string `json:"session_id,omitempty"`
	// CellTimeoutSeconds bounds each cell; 0 means the server's default timeout.
	CellTimeoutSeconds float64 `json:"cell_timeout_seconds,omitempty"`
	// AllowErrors runs on past cells that raise.
	AllowErrors bool `json:"allow_errors,omitempty"`
}

// NotebookRunResult is the answer of POST /v1/notebooks/run: the executed notebook
// and how the run went. It is sent with 200 whether the cells succeeded or not.
type NotebookRunResult struct {
	Notebook *notebook.Notebook `json:"notebook"`
	// Status is "ok", "error", "timeout" or "kernel_died".
	Status notebook.Status `json:"status"`
	// FailedCell is the index of the cell that failed (in the returned notebook,
	// which has the injected parameters cell), or null.
	FailedCell *int                  `json:"failed_cell"`
	Error      *executor.ErrorInfo   `json:"error"`
	SessionID  string                `json:"session_id"`
	Cells      []notebook.CellResult `json:"cells"`
	Artifacts  []executor.Artifact   `json:"artifacts"`
}

func (h *handler) runNotebook(w http.ResponseWriter, r *http.Request) {
	var b NotebookRunBody
	if err := decode(r, &b); err != nil {
		writeErr(w, err)
		return
	}
	opts, nb, err := notebookRun(b)
	if err != nil {
		writeErr(w, err)
		return
	}
	rep, err := notebook.Run(r.Context(), h.e, nb, opts)
	if err != nil {
		if errors.Is(err, notebook.ErrInvalidParameter) || errors.Is(err, notebook.ErrInvalid) {
			err = fmt.Errorf("%w: %w", executor.ErrInvalidRequest, err)
		}
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, NotebookRunResult{
		Notebook:   nb,
		Status:     rep.Status,
		FailedCell: rep.FailedCell,
		Error:      rep.Error,
		SessionID:  rep.SessionID,
		Cells:      rep.Cells,
		Artifacts:  rep.Artifacts,
	})
}

// notebookRun checks a body and turns it into the notebook and its run options.
func notebookRun(b NotebookRunBody) (notebook.RunOptions, *notebook.Notebook, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", executor.ErrInvalidRequest, fmt.Sprintf(format, args...))
	}
	if len(b.Notebook) == 0 || string(b.Notebook) == "null" {
		return notebook.RunOptions{}, nil, invalid(`"notebook" is required: an nbformat v4 notebook object`)
	}
	nb, err := notebook.Parse(b.Notebook)
	if err != nil {
		return notebook.RunOptions{}, nil, invalid("%v", err)
	}
	params, err := parameters(b.Parameters)
	if err != nil {
		return notebook.RunOptions{}, nil, invalid("%v", err)
	}
	if b.CellTimeoutSeconds < 0 || b.CellTimeoutSeconds > 1e7 {
		return notebook.RunOptions{}, nil, invalid("cell_timeout_seconds must be between 0 and 1e7")
	}
	if b.SessionID != "" && !executor.ValidSessionID(b.SessionID) {
		return notebook.RunOptions{}, nil, invalid("invalid session id %q", b.SessionID)
	}
	return notebook.RunOptions{
		SessionID:   b.SessionID,
		Parameters:  params,
		Inputs:      b.Inputs,
		CellTimeout: time.Duration(b.CellTimeoutSeconds * float64(time.Second)),
		AllowErrors: b.AllowErrors,
	}, nb, nil
}

// parameters reads a JSON object of parameters, keeping its key order.
func parameters(raw json.RawMessage) ([]notebook.Parameter, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New(`"parameters" must be a JSON object of name: value`)
	}
	var params []notebook.Parameter
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("parameters: %v", err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("parameters: %v", err)
		}
		params = append(params, notebook.Parameter{Name: tok.(string), Value: v})
	}
	return params, nil
}
