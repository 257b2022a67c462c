// Package httpapi serves an Executor over HTTP with JSON bodies (and Server-Sent
// Events for streamed execution). Start reading at [New] and at the route table
// in routes.go ([Routes] lists it): each route is declared there once, with who
// may call it, its body limit and its content type. Every request passes one
// guard (guard.go) — Host, connection reserve, token, cross-site requests,
// content type, body limit — before its route's handler runs; the handlers are
// in sessions.go, calls.go, files.go, artifacts.go and notebook.go, the JSON
// bodies they read in decode.go.
package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/executor"
)

// ExecuteBody is the JSON body of POST /v1/sessions/{id}/execute; see api.ExecuteBody.
type ExecuteBody = api.ExecuteBody

// Health is the answer of GET /healthz; see api.Health.
type Health = api.Health

// handler is the HTTP API: the route table behind its guard.
type handler struct {
	e     *executor.Executor
	calls *calls.Registry
	o     Options
	log   *slog.Logger
	hosts hostRule
	csrf  *http.CrossOriginProtection

	rows map[string]*row // the route table by pattern, for the guard
	// mux serves the table's handlers; it is reached only through ServeHTTP,
	// after the guard.
	mux *http.ServeMux

	notebookRuns chan struct{} // a slot per notebook running, MaxNotebookRuns of them
}

// New returns the HTTP API on e, safe for concurrent use. Its routes, in the
// order of the table in routes.go (and of the README):
//
//	POST   /v1/sessions/{id}/execute     run code (JSON Result, SSE with Accept: text/event-stream,
//	                                     or 202 {"call_id", "session_id"} with "detach": true)
//	POST   /v1/sessions                  create a session {"id", "template"} (201; 200 if it exists with that template)
//	GET    /v1/sessions                  list sessions (each with its template)
//	GET    /v1/templates                 the templates, with their effective limits
//	GET    /v1/sessions/{id}             one session
//	DELETE /v1/sessions/{id}             close a session (kernel stopped, files deleted, artifacts kept)
//	POST   /v1/sessions/{id}/interrupt   interrupt the running call
//	POST   /v1/sessions/{id}/reset       fresh kernel, same files
//	GET    /v1/sessions/{id}/artifacts   list a session's artifacts
//	GET    /v1/artifacts/{session}/{path...}  download an artifact
//	POST   /v1/notebooks/run             run a notebook (nbformat v4 in, executed notebook out)
//	GET    /healthz                      backend reachability (no token, even at the connection cap)
//	GET    /v1/calls/{call_id}           a call's state (and Result when done)
//	GET    /v1/calls/{call_id}/events    a call's events as SSE, replayed then live (Last-Event-ID resumes)
//	POST   /v1/calls/{call_id}/cancel    interrupt a call
//	GET    /v1/sessions/{id}/calls       a session's recent calls, newest first
//	PUT    /v1/sessions/{id}/files/{path...}  write a session file (creates the session)
//	GET    /v1/sessions/{id}/files/{path...}  read a session file
//	DELETE /v1/sessions/{id}/files/{path...}  delete a session file (?recursive=1 for a directory)
//	GET    /v1/sessions/{id}/files?path=DIR  list a session directory
//	POST   /v1/sessions/{id}/files:batch  several uploads and downloads, a result each
//	POST, GET, DELETE /mcp               MCP over streamable HTTP (with Options.MCP)
//	GET    /metrics                      Prometheus metrics (with Options.Metrics)
//	/api, /api/kernelspecs, /api/kernels...  the Jupyter kernel gateway API (with Options.Gateway)
//	GET    /  and  GET /ui/{asset...}    the dashboard's page and assets (with Options.Dashboard; no token)
//
// Request bodies must be Content-Type application/json (uploads aside), and
// cross-origin browser requests that change state are refused, so a web page
// cannot make a browser run code on a kernelbox listening on localhost without
// a token.
//
// e may be nil for a handler whose calls go to Options.Calls only (tests).
func New(e *executor.Executor, o Options) http.Handler {
	o = o.withDefaults()
	if o.Calls == nil {
		o.Calls = calls.New(e, calls.Options{Logger: o.Logger})
	}
	h := &handler{
		e: e, calls: o.Calls, o: o, log: o.Logger,
		hosts:        newHostRule(o.Hosts),
		csrf:         http.NewCrossOriginProtection(),
		rows:         map[string]*row{},
		mux:          http.NewServeMux(),
		notebookRuns: make(chan struct{}, o.MaxNotebookRuns),
	}
	for _, r := range h.routes() {
		r := r.resolved(o)
		h.mux.HandleFunc(r.Pattern, r.serve)
		h.rows[r.Pattern] = &r
	}
	return h
}
