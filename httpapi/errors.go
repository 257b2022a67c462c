package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/workspace"
)

// ErrorBody is the JSON body of every non-2xx answer; see api.ErrorBody.
type ErrorBody = api.ErrorBody

// ErrorDetail is a machine-readable code and a human-readable message.
type ErrorDetail = api.ErrorDetail

// classify maps an executor or workspace error to an HTTP status and code: the
// workspace's own path errors first, then api's one table.
func classify(err error) (int, api.Code) {
	switch {
	case errors.Is(err, api.ErrInvalidPath):
		// Before workspace.ErrInvalidPath: a session file's path is its own code.
		return http.StatusBadRequest, api.CodeInvalidPath
	case errors.Is(err, workspace.ErrNotFound):
		return http.StatusNotFound, api.CodeNotFound
	case errors.Is(err, workspace.ErrInvalidPath), errors.Is(err, workspace.ErrInvalidSession):
		return http.StatusBadRequest, api.CodeInvalidRequest
	}
	code, status := api.CodeOf(err)
	return status, code
}

func writeError(w http.ResponseWriter, status int, code api.Code, msg string) {
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
}

func writeErr(w http.ResponseWriter, err error) {
	status, code := classify(err)
	msg := err.Error()
	if a := advice(code); a != "" {
		msg += " (" + a + ")"
	}
	writeError(w, status, code, msg)
}

// advice is what a client of this API can do about an error of kind code, or "":
// the executor states facts, the front end knows its routes and flags.
func advice(code api.Code) string {
	switch code {
	case api.CodeTooManySessions:
		return "close one with DELETE /v1/sessions/{id} or `kernelbox reset`, or start the server with a higher --max-sessions"
	case api.CodeTooManyNotebookRuns:
		return "retry when one has finished, or start the server with a higher --max-notebook-runs"
	}
	return ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
