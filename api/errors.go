package api

import (
	"context"
	"errors"
	"net/http"
)

// Errors callers branch on, shared by the executor (which wraps them with details)
// and by clients (whose error answers match them with errors.Is).
var (
	// ErrDisabled: there is no backend that can run code (backend "none").
	ErrDisabled = errors.New("code execution is disabled")

	// ErrInvalidRequest: the request is malformed (session id, empty or huge code,
	// bad inputs). Nothing was run.
	ErrInvalidRequest = errors.New("invalid request")

	// ErrDenied: the permission policy refused the call or one of its inputs.
	// Nothing was staged or run.
	ErrDenied = errors.New("permission denied")

	// ErrTooManySessions: starting another session would exceed the limit.
	ErrTooManySessions = errors.New("too many sessions")

	// ErrQueueFull: the session already has as many calls waiting as it may.
	ErrQueueFull = errors.New("session queue is full")

	// ErrNotFound: the session (or call, or artifact) does not exist.
	ErrNotFound = errors.New("not found")

	// ErrSessionClosed: the session was closed or reset while the call waited.
	ErrSessionClosed = errors.New("session closed")

	// ErrClosed: the executor is closed (shutting down).
	ErrClosed = errors.New("executor closed")

	// ErrBackend: the backend could not provide a kernel (server or container
	// failed to start). The call did not run.
	ErrBackend = errors.New("backend failure")

	// ErrTooLarge: the request is over one of the server's size limits (a
	// notebook's bytes or cells). It was not read to the end; nothing was run.
	ErrTooLarge = errors.New("request too large")

	// ErrTooManyNotebookRuns: the server already runs as many notebooks at once
	// as it may. Nothing was read or run; retry later.
	ErrTooManyNotebookRuns = errors.New("too many notebook runs")

	// ErrInvalidPath: a session file path is empty, absolute, has a "." or ".."
	// element, NUL, bytes that are not UTF-8 or an over-long name, or leads
	// through a symbolic link or names a FIFO, socket or device. Nothing was
	// read or written.
	ErrInvalidPath = errors.New("invalid path")

	// ErrIsDirectory: a session file path names a directory where a file was
	// expected.
	ErrIsDirectory = errors.New("is a directory")

	// ErrNotDirectory: a session file path has a file where a directory was
	// expected (a parent element, or the directory to list).
	ErrNotDirectory = errors.New("not a directory")

	// ErrQuota: the session's disk is full (its disk quota); an upload that hit
	// it left no partial file.
	ErrQuota = errors.New("session disk quota exceeded")

	// ErrExists: an upload that must not overwrite (If-None-Match: *) found a
	// file there already.
	ErrExists = errors.New("file exists")

	// ErrTemplateMismatch: a call named a template other than the one its
	// session was created with; a session keeps its template. Nothing was run.
	ErrTemplateMismatch = errors.New("session has another template")

	// ErrRateLimited: a scoped token made more calls than its rate_per_minute
	// allows; retry after the answer's Retry-After.
	ErrRateLimited = errors.New("rate limited")

	// ErrTooManyTokens: minting another scoped token would pass the server's
	// cap; revoke some first.
	ErrTooManyTokens = errors.New("too many tokens")
)

// Code is the machine-readable kind of an error answer.
type Code string

// The error codes of the HTTP API, the Go client and the MCP tools.
const (
	CodeInvalidRequest      Code = "invalid_request"
	CodeUnauthorized        Code = "unauthorized"
	CodeDenied              Code = "permission_denied"
	CodeNotFound            Code = "not_found"
	CodeDisabled            Code = "disabled"
	CodeTooManySessions     Code = "too_many_sessions"
	CodeQueueFull           Code = "queue_full"
	CodeSessionClosed       Code = "session_closed"
	CodeShuttingDown        Code = "shutting_down"
	CodeBackend             Code = "backend_error"
	CodeCanceled            Code = "canceled"
	CodeCrossOrigin         Code = "cross_origin"
	CodeInternal            Code = "internal"
	CodeCallExpired         Code = "call_expired"
	CodeCallFinished        Code = "call_finished"
	CodeCallLost            Code = "call_lost"
	CodeForbiddenHost       Code = "forbidden_host"
	CodeTooLarge            Code = "too_large"
	CodeTooManyNotebookRuns Code = "too_many_notebook_runs"
	CodeInvalidPath         Code = "invalid_path"
	CodeIsDirectory         Code = "is_directory"
	CodeNotDirectory        Code = "not_directory"
	CodeQuota               Code = "quota"
	CodeExists              Code = "exists"
	CodeTemplateMismatch    Code = "template_mismatch"
	CodeRateLimited         Code = "rate_limited"
	CodeTooManyTokens       Code = "too_many_tokens"
	// CodeTooManyConnections answers a request on one of the connection slots
	// a server keeps for authenticated calls; it has no sentinel error, as it
	// is never an executor's.
	CodeTooManyConnections Code = "too_many_connections"
)

// codes is the one table of error kinds: the sentinel, its code and its HTTP status.
var codes = []struct {
	err    error
	code   Code
	status int
}{
	{ErrInvalidRequest, CodeInvalidRequest, http.StatusBadRequest},
	{ErrDenied, CodeDenied, http.StatusForbidden},
	{ErrDisabled, CodeDisabled, http.StatusServiceUnavailable},
	{ErrTooManySessions, CodeTooManySessions, http.StatusTooManyRequests},
	{ErrQueueFull, CodeQueueFull, http.StatusTooManyRequests},
	{ErrNotFound, CodeNotFound, http.StatusNotFound},
	{ErrSessionClosed, CodeSessionClosed, http.StatusConflict},
	{ErrClosed, CodeShuttingDown, http.StatusServiceUnavailable},
	{ErrBackend, CodeBackend, http.StatusBadGateway},
	{context.Canceled, CodeCanceled, 499},
	{ErrCallExpired, CodeCallExpired, http.StatusGone},
	{ErrCallFinished, CodeCallFinished, http.StatusConflict},
	{ErrCallLost, CodeCallLost, http.StatusGone},
	{ErrTooLarge, CodeTooLarge, http.StatusRequestEntityTooLarge},
	{ErrTooManyNotebookRuns, CodeTooManyNotebookRuns, http.StatusTooManyRequests},
	{ErrInvalidPath, CodeInvalidPath, http.StatusBadRequest},
	{ErrIsDirectory, CodeIsDirectory, http.StatusConflict},
	{ErrNotDirectory, CodeNotDirectory, http.StatusConflict},
	{ErrQuota, CodeQuota, http.StatusInsufficientStorage},
	{ErrExists, CodeExists, http.StatusPreconditionFailed},
	{ErrTemplateMismatch, CodeTemplateMismatch, http.StatusConflict},
	{ErrRateLimited, CodeRateLimited, http.StatusTooManyRequests},
	{ErrTooManyTokens, CodeTooManyTokens, http.StatusTooManyRequests},
	{ErrCannotHibernate, CodeCannotHibernate, http.StatusConflict},
	{ErrSnapshotTooLarge, CodeSnapshotTooLarge, http.StatusInsufficientStorage},
	{ErrCannotResume, CodeCannotResume, http.StatusConflict},
}

// CodeOf returns the code and HTTP status for err: the first sentinel of the table
// that err matches with errors.Is, or internal (500).
func CodeOf(err error) (Code, int) {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code, c.status
		}
	}
	return CodeInternal, http.StatusInternalServerError
}

// ErrorOf returns the sentinel error for code, or nil when it has none.
func ErrorOf(code Code) error {
	for _, c := range codes {
		if c.code == code {
			return c.err
		}
	}
	return nil
}

// ErrorBody is the JSON body of every non-2xx answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a machine-readable code and a human-readable message.
type ErrorDetail struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}
