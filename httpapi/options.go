package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/kernelbox/kernelbox/audit"
	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/jupyterapi"
	"github.com/kernelbox/kernelbox/tokens"
	"github.com/kernelbox/kernelbox/workspace"
)

// Options configures the handler. The zero value works: no token, any Host, no
// connection reserve, the API routes only.
type Options struct {
	// Token, when set, is required as "Authorization: Bearer <Token>" (or
	// Jupyter's "Authorization: token <Token>") on every
	// route but the exemptions of the route table (Access other than NeedsToken:
	// /healthz and the dashboard's page and assets).
	Token string

	// Tokens, when set, keeps the scoped tokens: a request may carry one of
	// them instead of Token, and is then held to its scope by the route
	// table's scope columns (scope.go). Defaults to none: Token only.
	Tokens *tokens.Store

	// Audit, when set, gets a line per request that changes state and per
	// refusal (audited.go). Defaults to no audit log.
	Audit *audit.Log

	// Hosts are the Host names this server answers to; a request with another
	// Host is refused on every route. Defaults to any Host.
	Hosts Hosts

	// Reserve, when set, tells the guard which requests arrived on one of the
	// connection slots kept for token holders. Defaults to none.
	Reserve ConnReserve

	// MCP, when set, is served at /mcp (GET, POST and DELETE), behind the same
	// guard as the API. Defaults to no /mcp route.
	MCP http.Handler

	// Metrics, when set, is served at GET /metrics, behind the token. Defaults to
	// no /metrics route.
	Metrics http.Handler

	// Gateway, when set, serves the Jupyter kernel gateway API (/api,
	// /api/kernelspecs, /api/kernels and their WebSocket; see
	// docs/jupyter-gateway.md), every route behind the token. Defaults to none.
	Gateway *jupyterapi.Gateway

	// Dashboard, when set, is served at GET / (exactly) and under
	// dashboard.AssetPrefix, without the token: the page and its assets carry
	// no data. Defaults to no dashboard routes.
	Dashboard http.Handler

	// Workspace serves artifact listings and downloads. Nil disables those routes.
	Workspace *workspace.Manager

	// MaxBodyBytes caps request bodies of the routes that declare no limit of
	// their own in the route table. Defaults to 4 MiB.
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

// Hosts says which Host header values name this server. A page served from an
// attacker's name that resolves to 127.0.0.1 (DNS rebinding) sends that name as
// Host: only this server's own names are answered. The zero value accepts every
// Host, which suits a unix socket (no browser reaches one) and tests.
type Hosts struct {
	// Loopback accepts the names of a loopback listener: localhost,
	// 127.0.0.0/8 and [::1], with or without a port.
	Loopback bool

	// Allowed are further accepted names (without port; a port is ignored).
	Allowed []string
}

// ConnReserve is the server's reserve of connections for token holders under
// file-descriptor pressure (cmd/kernelbox/conns.go). On a reserved connection
// the guard serves only requests with the token and routes of Access Probe;
// any other request is answered 503 too_many_connections and its connection
// closed, freeing the slot. Implementations must be safe for concurrent use.
type ConnReserve interface {
	// Reserved reports whether r arrived on a connection in the reserve.
	Reserved(r *http.Request) bool
	// Refused is told of each request the guard refused there (for metrics).
	Refused()
}

// The defaults of the notebook limits of Options, for flags to show.
const (
	DefaultMaxNotebookBytes = 16 << 20
	DefaultMaxNotebookCells = 10_000
	DefaultMaxNotebookRuns  = 2
)

// withDefaults returns o with every unset field at its default but Calls,
// which New makes.
func (o Options) withDefaults() Options {
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
	return o
}
