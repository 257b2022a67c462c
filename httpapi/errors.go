package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/workspace"
)

// ErrorBody is the JSON body of every non-2xx answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a machine-readable code and a human-readable message.
type ErrorDetail struct {
	// Code is one of: invalid_request, unauthorized, permission_denied, not_found,
	// disabled, too_many_sessions, queue_full, session_closed, shutting_down,
	// backend_error, canceled, internal.
	Code    string `json:"code"`
	Message string `json:"message"`
}

// classify maps an executor or workspace error to an HTTP status and code.
func classify(err error) (int, string) {
	switch {
	case errors.Is(err, executor.ErrInvalidRequest):
		return http.StatusBadRequest, "invalid_request"
	case errors.Is(err, executor.ErrDenied):
		return http.StatusForbidden, "permission_denied"
	case errors.Is(err, executor.ErrDisabled):
		return http.StatusServiceUnavailable, "disabled"
	case errors.Is(err, executor.ErrTooManySessions):
		return http.StatusTooManyRequests, "too_many_sessions"
	case errors.Is(err, executor.ErrQueueFull):
		return http.StatusTooManyRequests, "queue_full"
	case errors.Is(err, executor.ErrNoSession), errors.Is(err, workspace.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, workspace.ErrInvalidPath), errors.Is(err, workspace.ErrInvalidSession):
		return http.StatusBadRequest, "invalid_request"
	case errors.Is(err, executor.ErrSessionClosed):
		return http.StatusConflict, "session_closed"
	case errors.Is(err, executor.ErrClosed):
		return http.StatusServiceUnavailable, "shutting_down"
	case errors.Is(err, executor.ErrBackend):
		return http.StatusBadGateway, "backend_error"
	case errors.Is(err, context.Canceled):
		return 499, "canceled"
	default:
		return http.StatusInternalServerError, "internal"
	}
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
}

func writeErr(w http.ResponseWriter, err error) {
	status, code := classify(err)
	writeError(w, status, code, err.Error())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
