package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/notebook"
)

// NotebookRunBody is the JSON body of POST /v1/notebooks/run.
type NotebookRunBody struct {
	// Notebook is an nbformat v4 notebook (required). The server reads it
	// straight from the request stream, cell by cell, not through this field.
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
	Status api.Status `json:"status"`
	// FailedCell is the index of the cell that failed (in the returned notebook,
	// which has the injected parameters cell), or null.
	FailedCell *int                  `json:"failed_cell"`
	Error      *api.ErrorInfo        `json:"error"`
	SessionID  string                `json:"session_id"`
	Cells      []notebook.CellResult `json:"cells"`
	Artifacts  []api.Artifact        `json:"artifacts"`
}

// runNotebook refuses what cannot run before reading the body (execution
// disabled, every notebook slot taken), then decodes the notebook cell by cell
// under the size and cell limits, runs it, and streams the answer cell by cell:
// a request costs a small multiple of its size, never a queue of them.
func (h *handler) runNotebook(w http.ResponseWriter, r *http.Request) {
	if err := h.e.Disabled(); err != nil {
		writeErr(w, err)
		return
	}
	if r.ContentLength > h.o.MaxNotebookBytes {
		writeErr(w, h.notebookTooLarge())
		return
	}
	select {
	case h.notebookRuns <- struct{}{}:
		defer func() { <-h.notebookRuns }()
	default:
		writeErr(w, fmt.Errorf("%w: %d notebooks are running, the server's limit", api.ErrTooManyNotebookRuns, cap(h.notebookRuns)))
		return
	}
	b, nb, err := h.decodeNotebookRun(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	opts, err := notebookRun(b)
	if err != nil {
		writeErr(w, err)
		return
	}
	rep, err := notebook.Run(r.Context(), h.e, nb, opts)
	if err != nil {
		if errors.Is(err, notebook.ErrInvalidParameter) || errors.Is(err, notebook.ErrInvalid) {
			err = fmt.Errorf("%w: %w", api.ErrInvalidRequest, err)
		}
		writeErr(w, err)
		return
	}
	writeNotebookResult(w, nb, rep)
}

func (h *handler) notebookTooLarge() error {
	return fmt.Errorf("%w: the notebook request is over the server's limit of %s (%d bytes); send a smaller notebook or start the server with a higher --max-notebook-bytes",
		api.ErrTooLarge, sizeName(h.o.MaxNotebookBytes), h.o.MaxNotebookBytes)
}

// sizeName writes n bytes for people: "16 MiB", "64 KiB", "1.5 MiB".
func sizeName(n int64) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// decodeNotebookRun reads a NotebookRunBody from r's body, the notebook straight
// from the stream (see notebook.Decode) and the other fields as usual, with
// unknown fields and trailing data refused.
func (h *handler) decodeNotebookRun(r *http.Request) (NotebookRunBody, *notebook.Notebook, error) {
	var b NotebookRunBody
	var nb *notebook.Notebook
	fail := func(err error) (NotebookRunBody, *notebook.Notebook, error) {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return b, nil, h.notebookTooLarge()
		case errors.Is(err, notebook.ErrTooManyCells):
			return b, nil, fmt.Errorf("%w: the notebook has more than %d cells, the server's limit; send a smaller notebook or start the server with a higher --max-notebook-cells",
				api.ErrTooLarge, h.o.MaxNotebookCells)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return b, nil, fmt.Errorf("%w: body: %v", api.ErrInvalidRequest, err)
		case errors.Is(err, notebook.ErrInvalid):
			return b, nil, fmt.Errorf("%w: %w", api.ErrInvalidRequest, err)
		}
		return b, nil, fmt.Errorf("%w: body: %v", api.ErrInvalidRequest, err)
	}
	dec := json.NewDecoder(r.Body)
	if tok, err := dec.Token(); err != nil {
		if err == io.EOF {
			err = errors.New(`empty; send JSON like {"notebook": {...}}`)
		}
		return fail(err)
	} else if tok != json.Delim('{') {
		return fail(errors.New("not a JSON object"))
	}
	// The small fields are gathered and decoded strictly as one object.
	var rest bytes.Buffer
	rest.WriteByte('{')
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		if key := tok.(string); key == "notebook" {
			if nb != nil {
				return fail(errors.New(`"notebook" given twice`))
			}
			if nb, err = notebook.Decode(dec, h.o.MaxNotebookCells); err != nil {
				return fail(err)
			}
			continue
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fail(err)
		}
		if rest.Len() > 1 {
			rest.WriteByte(',')
		}
		k, _ := json.Marshal(tok)
		rest.Write(k)
		rest.WriteByte(':')
		rest.Write(raw)
	}
	if _, err := dec.Token(); err != nil {
		return fail(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fail(errors.New("data after the JSON object"))
	}
	rest.WriteByte('}')
	rd := json.NewDecoder(&rest)
	rd.DisallowUnknownFields()
	if err := rd.Decode(&b); err != nil {
		return fail(err)
	}
	if nb == nil {
		return b, nil, fmt.Errorf(`%w: "notebook" is required: an nbformat v4 notebook object`, api.ErrInvalidRequest)
	}
	return b, nb, nil
}

// writeNotebookResult sends a NotebookRunResult with the notebook written cell by
// cell, so that the answer is never held whole in memory.
func writeNotebookResult(w http.ResponseWriter, nb *notebook.Notebook, rep *notebook.Report) {
	rest, err := json.Marshal(struct {
		Status     api.Status            `json:"status"`
		FailedCell *int                  `json:"failed_cell"`
		Error      *api.ErrorInfo        `json:"error"`
		SessionID  string                `json:"session_id"`
		Cells      []notebook.CellResult `json:"cells"`
		Artifacts  []api.Artifact        `json:"artifacts"`
	}{rep.Status, rep.FailedCell, rep.Error, rep.SessionID, rep.Cells, rep.Artifacts})
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, `{"notebook":`)
	if err := nb.WriteJSON(w); err != nil {
		return // the client is gone, or the answer is cut: nothing more to say
	}
	_, _ = io.WriteString(w, ",")
	_, _ = w.Write(rest[1:])
	_, _ = io.WriteString(w, "\n")
}

// notebookRun checks a body's fields other than the notebook and turns them
// into run options.
func notebookRun(b NotebookRunBody) (notebook.RunOptions, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", api.ErrInvalidRequest, fmt.Sprintf(format, args...))
	}
	params, err := parameters(b.Parameters)
	if err != nil {
		return notebook.RunOptions{}, invalid("%v", err)
	}
	if b.CellTimeoutSeconds < 0 || b.CellTimeoutSeconds > 1e7 {
		return notebook.RunOptions{}, invalid("cell_timeout_seconds must be between 0 and 1e7")
	}
	if b.SessionID != "" && !api.ValidSessionID(b.SessionID) {
		return notebook.RunOptions{}, invalid("invalid session id %q", b.SessionID)
	}
	return notebook.RunOptions{
		SessionID:   b.SessionID,
		Parameters:  params,
		Inputs:      b.Inputs,
		CellTimeout: time.Duration(b.CellTimeoutSeconds * float64(time.Second)),
		AllowErrors: b.AllowErrors,
	}, nil
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
