// Package httpapi serves an Executor over HTTP with JSON bodies (and Server-Sent
// Events for streamed execution). Start reading at [New]; the routes are listed there
// and documented in the README.
package httpapi

import (
	"github.com/kernelbox/kernelbox/api"

	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/workspace"
)

// Options configures the handler. The zero value works (no auth).
type Options struct {
	// Token, when set, is required as "Authorization: Bearer <Token>" on every route
	// but /healthz.
	Token string

	// Workspace serves artifact listings and downloads. Nil disables those routes.
	Workspace *workspace.Manager

	// MaxBodyBytes caps request bodies. Defaults to 4 MiB.
	MaxBodyBytes int64

	// MaxNotebookBytes caps the body of POST /v1/notebooks/run, whose notebooks
	// carry their images; over it the answer is 413 too_large. Defaults to
	// 16 MiB.
	MaxNotebookBytes int64

	// MaxNotebookCells caps the cells of a notebook sent to POST
	// /v1/notebooks/run, checked as they are read; over it the answer is 413
	// too_large. Defaults to 10,000.
	MaxNotebookCells int

	// MaxNotebookRuns caps the notebooks run (and read) at once; past it a
	// request is answered 429 too_many_notebook_runs at once, before its body
	// is read. Each costs at most about 5 times its notebook's size plus 2 KiB
	// a cell (all allocation counted). Defaults to 2.
	MaxNotebookRuns int

	// MaxBatchBytes caps the body of POST /v1/sessions/{id}/files:batch, and
	// the bytes its downloads may return together. Defaults to 64 MiB. Single
	// uploads (PUT) stream and are limited per file by the workspace
	// (workspace.Options.MaxFileBytes).
	MaxBatchBytes int64

	// Logger receives one line per request. Defaults to discarding them.
	Logger *slog.Logger

	// Calls registers every call made through the API, so that calls outlive
	// their connections (see docs/calls.md). Share one with other front ends
	// (MCP) to see their calls too; its owner closes it. Defaults to a private
	// registry with default options, built on the executor.
	Calls *calls.Registry

	// StreamWriteTimeout bounds one write of an event stream to a client that
	// does not read: past it the stream (not the call) is dropped. Defaults to
	// 1 minute.
	StreamWriteTimeout time.Duration
}

// ExecuteBody is the JSON body of POST /v1/sessions/{id}/execute; see api.ExecuteBody.
type ExecuteBody = api.ExecuteBody

// Health is the answer of GET /healthz; see api.Health.
type Health = api.Health

type handler struct {
	e     *executor.Executor
	calls *calls.Registry
	o     Options
	log   *slog.Logger
	mux   *http.ServeMux
	csrf  *http.CrossOriginProtection

	notebookRuns chan struct{} // a slot per notebook running, MaxNotebookRuns of them
}

// The defaults of the notebook limits of Options, for flags to show.
const (
	DefaultMaxNotebookBytes = 16 << 20
	DefaultMaxNotebookCells = 10_000
	DefaultMaxNotebookRuns  = 2
)

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// New returns the HTTP handler:
//
//	POST   /v1/sessions/{id}/execute     run code (JSON Result, SSE with Accept: text/event-stream,
//	                                     or 202 {"call_id", "session_id"} with "detach": true)
//	GET    /v1/calls/{call_id}           a call's state (and Result when done)
//	GET    /v1/calls/{call_id}/events    a call's events as SSE, replayed then live (Last-Event-ID resumes)
//	POST   /v1/calls/{call_id}/cancel    interrupt a call
//	GET    /v1/sessions/{id}/calls       a session's recent calls, newest first
//	POST   /v1/sessions                  create a session {"id", "template"} (201; 200 if it exists with that template)
//	GET    /v1/sessions                  list sessions (each with its template)
//	GET    /v1/templates                 the templates, with their effective limits
//	GET    /v1/sessions/{id}             one session
//	DELETE /v1/sessions/{id}             close a session (kernel stopped, files deleted, artifacts kept)
//	POST   /v1/sessions/{id}/interrupt   interrupt the running call
//	POST   /v1/sessions/{id}/reset       fresh kernel, same files
//	GET    /v1/sessions/{id}/artifacts   list a session's artifacts
//	GET    /v1/artifacts/{session}/{path...}  download an artifact
//	PUT    /v1/sessions/{id}/files/{path...}  write a session file (files.go; creates the session)
//	GET    /v1/sessions/{id}/files/{path...}  read a session file
//	DELETE /v1/sessions/{id}/files/{path...}  delete a session file (?recursive=1 for a directory)
//	GET    /v1/sessions/{id}/files?path=DIR  list a session directory
//	POST   /v1/sessions/{id}/files:batch  several uploads and downloads, a result each
//	POST   /v1/notebooks/run             run a notebook (nbformat v4 in, executed notebook out)
//	GET    /healthz                      backend reachability (no auth)
//
// Requests with a body must be Content-Type application/json, and cross-origin
// browser requests that change state are refused, so a web page cannot make a
// browser run code on a kernelbox listening on localhost without a token.
//
// backend may be nil; it is used for /healthz only.
func New(e *executor.Executor, o Options) http.Handler {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.MaxNotebookBytes <= 0 {
		o.MaxNotebookBytes = DefaultMaxNotebookBytes
	}
	if o.MaxNotebookCells <= 0 {
		o.MaxNotebookCells = DefaultMaxNotebookCells
	}
	if o.MaxNotebookRuns <= 0 {
		o.MaxNotebookRuns = DefaultMaxNotebookRuns
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.StreamWriteTimeout <= 0 {
		o.StreamWriteTimeout = time.Minute
	}
	if o.Calls == nil {
		o.Calls = calls.New(e, calls.Options{Logger: o.Logger})
	}
	h := &handler{e: e, calls: o.Calls, o: o, log: o.Logger, mux: http.NewServeMux(), notebookRuns: make(chan struct{}, o.MaxNotebookRuns)}
	h.mux.HandleFunc("POST /v1/sessions/{id}/execute", h.execute)
	h.mux.HandleFunc("GET /v1/calls/{call_id}", h.call)
	h.mux.HandleFunc("GET /v1/calls/{call_id}/events", h.callEvents)
	h.mux.HandleFunc("POST /v1/calls/{call_id}/cancel", h.cancelCall)
	h.mux.HandleFunc("GET /v1/sessions/{id}/calls", h.sessionCalls)
	h.mux.HandleFunc("POST /v1/sessions", h.createSession)
	h.mux.HandleFunc("GET /v1/sessions", h.sessions)
	h.mux.HandleFunc("GET /v1/templates", h.templates)
	h.mux.HandleFunc("GET /v1/sessions/{id}", h.session)
	h.mux.HandleFunc("DELETE /v1/sessions/{id}", h.closeSession)
	h.mux.HandleFunc("POST /v1/sessions/{id}/interrupt", h.interrupt)
	h.mux.HandleFunc("POST /v1/sessions/{id}/reset", h.reset)
	h.mux.HandleFunc("GET /v1/sessions/{id}/artifacts", h.artifacts)
	h.mux.HandleFunc("GET /v1/artifacts/{session}/{path...}", h.artifact)
	h.mux.HandleFunc("POST /v1/notebooks/run", h.runNotebook)
	h.mux.HandleFunc("GET /healthz", h.health)
	h.csrf = http.NewCrossOriginProtection()
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if h.o.Token != "" && r.URL.Path != "/healthz" && !authorized(r, h.o.Token) {
		unauthorized(w)
		return
	}
	if err := h.csrf.Check(r); err != nil {
		writeError(w, http.StatusForbidden, api.CodeCrossOrigin, "cross-origin browser requests are refused: "+err.Error())
		return
	}
	if r.Method == http.MethodPost && r.ContentLength != 0 && !isJSON(r.Header.Get("Content-Type")) {
		writeError(w, http.StatusUnsupportedMediaType, api.CodeInvalidRequest, "send the body as Content-Type: application/json")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.bodyLimit(r))
	if !h.serveFiles(w, r) {
		h.mux.ServeHTTP(w, r)
	}
	h.log.Debug("http", "method", r.Method, "path", r.URL.Path, "duration", time.Since(start))
}

// RequireToken wraps h with the API's bearer token check, for handlers served next
// to the API (MCP, metrics); an empty token checks nothing.
func RequireToken(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !authorized(r, token) {
			unauthorized(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func authorized(r *http.Request, token string) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(tok), []byte(token)) == 1
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="kernelbox"`)
	writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "missing or wrong bearer token")
}

// decode reads a JSON body strictly: unknown fields and trailing data are errors.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("%w: request body over %d bytes", executor.ErrInvalidRequest, mbe.Limit)
		}
		if err == io.EOF {
			return fmt.Errorf("%w: empty body; send JSON like {\"code\": \"print(1)\"}", executor.ErrInvalidRequest)
		}
		return fmt.Errorf("%w: body: %v", executor.ErrInvalidRequest, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: body has data after the JSON object", executor.ErrInvalidRequest)
	}
	return nil
}

func (h *handler) request(r *http.Request) (req executor.Request, detach bool, err error) {
	var b ExecuteBody
	if err := decode(r, &b); err != nil {
		return executor.Request{}, false, err
	}
	if b.TimeoutSeconds < 0 || b.TimeoutSeconds > 1e7 {
		return executor.Request{}, false, fmt.Errorf("%w: timeout_seconds must be between 0 and 1e7", executor.ErrInvalidRequest)
	}
	if b.MaxWaitSeconds < 0 || b.MaxWaitSeconds > 1e7 {
		return executor.Request{}, false, fmt.Errorf("%w: max_wait_seconds must be between 0 and 1e7", executor.ErrInvalidRequest)
	}
	return executor.Request{
		SessionID: r.PathValue("id"),
		Code:      b.Code,
		Inputs:    b.Inputs,
		Template:  b.Template,
		Timeout:   time.Duration(b.TimeoutSeconds * float64(time.Second)),
		MaxWait:   time.Duration(b.MaxWaitSeconds * float64(time.Second)),
	}, b.Detach, nil
}

// execute starts a registered call: the call belongs to the registry, not to
// this request, so a dropped connection neither cancels nor loses it.
func (h *handler) execute(w http.ResponseWriter, r *http.Request) {
	req, detach, err := h.request(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	if !detach && !wantsSSE(r) {
		// The plain call runs on this goroutine (see calls.Registry.Run): it
		// still belongs to the registry, so a dropped connection neither
		// cancels nor loses it; this handler returns when it has ended.
		c, err := h.calls.Run(r.Context(), req)
		if err != nil {
			writeErr(w, err)
			return
		}
		if r.Context().Err() != nil {
			return // the client is gone; the call has its answer in the registry
		}
		w.Header().Set(CallIDHeader, c.ID())
		res, err := c.Final()
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
		return
	}
	c, err := h.calls.Start(r.Context(), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set(CallIDHeader, c.ID())
	if detach {
		writeJSON(w, http.StatusAccepted, api.DetachedCall{CallID: c.ID(), SessionID: c.SessionID()})
		return
	}
	h.stream(w, r, c, 0, true)
}

func wantsSSE(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

func (h *handler) sessions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"sessions": h.e.Sessions()})
}

// createSession creates a session with a template before its first call.
func (h *handler) createSession(w http.ResponseWriter, r *http.Request) {
	var b api.CreateSessionBody
	if err := decode(r, &b); err != nil {
		writeErr(w, err)
		return
	}
	existed := true
	if _, err := h.e.Session(b.ID); err != nil {
		existed = false
	}
	info, err := h.e.CreateSession(r.Context(), b.ID, b.Template)
	if err != nil {
		writeErr(w, err)
		return
	}
	status := http.StatusCreated
	if existed {
		status = http.StatusOK
	}
	writeJSON(w, status, info)
}

// templates lists the templates with their effective settings.
func (h *handler) templates(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"templates": h.e.TemplateInfos()})
}

func (h *handler) session(w http.ResponseWriter, r *http.Request) {
	info, err := h.e.Session(r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (h *handler) closeSession(w http.ResponseWriter, r *http.Request) {
	if err := h.e.CloseSession(r.Context(), r.PathValue("id")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) interrupt(w http.ResponseWriter, r *http.Request) {
	if err := h.e.Interrupt(r.Context(), r.PathValue("id")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) reset(w http.ResponseWriter, r *http.Request) {
	if err := h.e.ResetSession(r.Context(), r.PathValue("id")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) health(w http.ResponseWriter, r *http.Request) {
	hl := Health{Status: "ok", Backend: h.e.Backend(), Sessions: len(h.e.Sessions())}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := h.e.Health(ctx); err != nil {
		hl.Status, hl.Problem = "degraded", err.Error()
		writeJSON(w, http.StatusServiceUnavailable, hl)
		return
	}
	writeJSON(w, http.StatusOK, hl)
}
