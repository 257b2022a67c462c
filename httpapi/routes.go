package httpapi

import (
	"net/http"
	"slices"

	"github.com/kernelbox/kernelbox/dashboard"
	"github.com/kernelbox/kernelbox/tokens"
)

// Short names for the scope columns of the table.
var (
	opExecute   = []tokens.Op{tokens.OpExecute}
	opFiles     = []tokens.Op{tokens.OpFiles}
	opHibernate = []tokens.Op{tokens.OpHibernate}
	opFork      = []tokens.Op{tokens.OpFork}
	opClose     = []tokens.Op{tokens.OpClose}
)

// Route is one row of the route table as [Routes] lists it: what the guard
// checks before the row's handler runs.
type Route struct {
	// Pattern is the http.ServeMux pattern: "METHOD /path", wildcards in braces.
	Pattern string

	// Access says who may call the route: the token holder (NeedsToken, the
	// zero value) or anyone (Public, Probe). The rows that are not NeedsToken
	// are the one list of exemptions from the token.
	Access Access

	// MaxBody is the route's request body limit in bytes; NoBodyLimit for a
	// body that streams to a limit of its own. In the table, 0 stands for
	// Options.MaxBodyBytes.
	MaxBody int64

	// JSON says a body, when there is one, must be Content-Type
	// application/json (or a +json type); others are 415. Every POST route
	// declares it: a browser sends a cross-site form POST (text/plain,
	// urlencoded, multipart) without asking first.
	JSON bool

	// AsSent says the handler sees the path as the client sent it, not
	// cleaned: "files/../x" reaches it (and is refused there as
	// invalid_path) instead of being redirected to "x". Any other route with
	// a path that is not clean is redirected to the clean one.
	AsSent bool

	// Scoped says a scoped token may use the route; the others are the admin
	// token's only (403 for a scoped token). The scope columns below are
	// checked for scoped tokens only: the admin token may do everything.
	Scoped bool

	// Ops are the operations a scoped token's scope must allow (all of them);
	// none means watching, which every token may.
	Ops []tokens.Op

	// Target says where the route's session is (scope.go): a scoped token
	// out of that session's reach is answered 404, as for a missing session.
	Target Target

	// Creates says which session the route may create: the guard claims it
	// for the scoped token (its owner), after checking its id, its template
	// and the token's max_sessions.
	Creates Creates

	// Counted says a request spends one of the scoped token's calls
	// (rate_per_minute).
	Counted bool
}

// Access says who may call a route.
type Access int

const (
	// NeedsToken routes need Options.Token (when set).
	NeedsToken Access = iota
	// Public routes are served without the token: the dashboard's page and
	// assets, which carry no data. On a reserved connection they still need
	// the token.
	Public
	// Probe routes are served without the token, even on a reserved
	// connection: the health check must get through at the connection cap.
	Probe
)

// String returns the access's name, as the README's route table writes it.
func (a Access) String() string {
	switch a {
	case NeedsToken:
		return "token"
	case Public:
		return "public"
	case Probe:
		return "probe"
	}
	return "unknown"
}

// NoBodyLimit is the MaxBody of a route whose body is not limited by the
// guard: a single upload streams to the workspace's per-file limit.
const NoBodyLimit int64 = -1

// row is a Route with its handler.
type row struct {
	Route
	serve http.HandlerFunc
}

// routes is the route table: every route this server answers, each declared
// once. A request is matched to its row, checked by the guard (guard.go)
// against the row, then served by the row's handler.
func (h *handler) routes() []row {
	return slices.Concat(h.sessionRoutes(), h.durableRoutes(), h.callRoutes(), h.fileRoutes(), h.tokenRoutes(), h.mountedRoutes())
}

// sessionRoutes are the sessions, execution, artifacts and notebook routes.
func (h *handler) sessionRoutes() []row {
	return []row{
		{Route{Pattern: "POST /v1/sessions/{id}/execute", JSON: true, Scoped: true, Ops: opExecute, Target: PathID, Creates: CreatesTarget, Counted: true}, h.execute},
		{Route{Pattern: "POST /v1/sessions", JSON: true, Scoped: true, Ops: opExecute, Target: BodyID, Creates: CreatesTarget}, h.createSession},
		{Route{Pattern: "GET /v1/sessions", Scoped: true}, h.sessions}, // lists what the token may see
		{Route{Pattern: "GET /v1/templates", Scoped: true}, h.templates},
		{Route{Pattern: "GET /v1/sessions/{id}", Scoped: true, Target: PathID}, h.session},
		{Route{Pattern: "DELETE /v1/sessions/{id}", Scoped: true, Ops: opClose, Target: PathID}, h.closeSession},
		{Route{Pattern: "POST /v1/sessions/{id}/interrupt", JSON: true, Scoped: true, Ops: opExecute, Target: PathID}, h.interrupt},
		{Route{Pattern: "POST /v1/sessions/{id}/reset", JSON: true, Scoped: true, Ops: opExecute, Target: PathID}, h.reset},
		{Route{Pattern: "GET /v1/sessions/{id}/artifacts", Scoped: true, Target: PathID}, h.artifacts},
		{Route{Pattern: "GET /v1/artifacts/{session}/{path...}", Scoped: true, Target: PathSession}, h.artifact},
		// A notebook runs in sessions of its own: the admin's.
		{Route{Pattern: "POST /v1/notebooks/run", JSON: true, MaxBody: h.o.MaxNotebookBytes}, h.runNotebook},
		{Route{Pattern: "GET /healthz", Access: Probe, Scoped: true}, h.health},
	}
}

// callRoutes are the routes of registered calls (calls.go).
func (h *handler) callRoutes() []row {
	return []row{
		{Route{Pattern: "GET /v1/calls/{call_id}", Scoped: true, Target: CallID}, h.call},
		{Route{Pattern: "GET /v1/calls/{call_id}/events", Scoped: true, Target: CallID}, h.callEvents},
		{Route{Pattern: "POST /v1/calls/{call_id}/cancel", JSON: true, Scoped: true, Ops: opExecute, Target: CallID}, h.cancelCall},
		{Route{Pattern: "GET /v1/sessions/{id}/calls", Scoped: true, Target: PathID}, h.sessionCalls},
	}
}

// fileRoutes are the session files routes (files.go). They see the path as
// sent, to refuse one that leaves the session. GET of "files/" (no path)
// lists the session's top directory, as "files?path=" does.
func (h *handler) fileRoutes() []row {
	file := func(serve func(http.ResponseWriter, *http.Request, string, string)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { serve(w, r, r.PathValue("id"), r.PathValue("path")) }
	}
	list := func(w http.ResponseWriter, r *http.Request) { h.listFiles(w, r, r.PathValue("id")) }
	get := func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("path") == "" {
			list(w, r)
			return
		}
		file(h.getFile)(w, r)
	}
	return []row{
		// Uploads stream; the workspace limits each file as it is written.
		{Route{Pattern: "PUT /v1/sessions/{id}/files/{path...}", MaxBody: NoBodyLimit, AsSent: true, Scoped: true, Ops: opFiles, Target: PathID, Creates: CreatesTarget}, file(h.putFile)},
		{Route{Pattern: "GET /v1/sessions/{id}/files/{path...}", AsSent: true, Scoped: true, Ops: opFiles, Target: PathID}, get},
		{Route{Pattern: "DELETE /v1/sessions/{id}/files/{path...}", AsSent: true, Scoped: true, Ops: opFiles, Target: PathID}, file(h.removeFile)},
		{Route{Pattern: "GET /v1/sessions/{id}/files", AsSent: true, Scoped: true, Ops: opFiles, Target: PathID}, list},
		{Route{Pattern: "POST /v1/sessions/{id}/files:batch", JSON: true, MaxBody: h.o.MaxBatchBytes, AsSent: true, Scoped: true, Ops: opFiles, Target: PathID},
			func(w http.ResponseWriter, r *http.Request) { h.batchFiles(w, r, r.PathValue("id")) }},
	}
}

// mountedRoutes are the handlers served next to the API (Options.MCP,
// Metrics, Gateway, Dashboard), each behind the same guard.
func (h *handler) mountedRoutes() []row {
	var rows []row
	if m := h.o.MCP; m != nil {
		rows = append(rows,
			// MCP's tools show and touch only what the token may (mcpserver).
			row{Route{Pattern: "POST /mcp", JSON: true, Scoped: true, Counted: true}, m.ServeHTTP},
			row{Route{Pattern: "GET /mcp", Scoped: true}, m.ServeHTTP},
			row{Route{Pattern: "DELETE /mcp", Scoped: true}, m.ServeHTTP})
	}
	if m := h.o.Metrics; m != nil {
		rows = append(rows, row{Route{Pattern: "GET /metrics"}, m.ServeHTTP})
	}
	if g := h.o.Gateway; g != nil {
		for _, r := range g.Routes() {
			rt := Route{Pattern: r.Pattern, JSON: r.JSON, Scoped: r.Scoped, Ops: r.Ops}
			if r.Session {
				rt.Target = PathID
			}
			rows = append(rows, row{rt, r.Serve})
		}
	}
	if d := h.o.Dashboard; d != nil {
		rows = append(rows,
			row{Route{Pattern: "GET /{$}", Access: Public, Scoped: true}, d.ServeHTTP},
			row{Route{Pattern: "GET " + dashboard.AssetPrefix + "{asset...}", Access: Public, Scoped: true}, d.ServeHTTP})
	}
	return rows
}

// Routes returns the route table New(e, o) serves, in its order, with each
// body limit resolved (0 becomes Options.MaxBodyBytes).
func Routes(o Options) []Route {
	h := &handler{o: o.withDefaults()}
	rows := h.routes()
	out := make([]Route, len(rows))
	for i, r := range rows {
		out[i] = r.resolved(h.o).Route
	}
	return out
}

// resolved returns r with its body limit resolved against o.
func (r row) resolved(o Options) row {
	if r.MaxBody == 0 {
		r.MaxBody = o.MaxBodyBytes
	}
	return r
}
