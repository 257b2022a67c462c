package jupyterapi

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/kernelbox/kernelbox/audit"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/tokens"
)

// Options configures a Gateway. The zero value works.
type Options struct {
	// MaxFrameBytes bounds one WebSocket frame from a client; a larger one
	// closes the connection (1009, message too big). Defaults to 4 MiB.
	MaxFrameBytes int64

	// ClientQueue bounds the messages queued for one client that it has not
	// read; past it (or past ClientQueueBytes) the client is disconnected with
	// a close reason, so that it never holds up the kernel or other clients.
	// Defaults to 1024.
	ClientQueue int

	// ClientQueueBytes bounds the bytes queued for one client. Defaults to
	// 64 MiB.
	ClientQueueBytes int64

	// WriteTimeout bounds one write to a client. Defaults to 10 seconds.
	WriteTimeout time.Duration

	// MaxInFlight bounds the requests (calls and kernel requests) one client
	// may have waiting at once; past it a request is answered with an error
	// reply at once. Defaults to 64.
	MaxInFlight int

	// RequestTimeout bounds a kernel request other than execute_request
	// (kernel_info, complete, inspect, ...). Defaults to 30 seconds.
	RequestTimeout time.Duration

	// AllowTyping lets Jupyter clients run code in, interrupt, restart and shut
	// down the sessions agents started (through /v1, MCP or the CLI). Off (the
	// default), such a session can be opened only to watch: its clients see
	// every call as it runs and may send kernel_info and comm_info requests.
	AllowTyping bool

	// Tokens, when set, limits what a scoped token sees (GET /api/kernels
	// lists only the sessions in its reach; httpapi's guard checks the rest),
	// and a client of a token whose scope lacks "execute" only watches.
	// Defaults to none.
	Tokens *tokens.Store

	// Audit, when set, gets a line when a WebSocket is ended by its token's
	// revocation. Defaults to none.
	Audit *audit.Log

	// Logger receives debug logs. Defaults to discarding them.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxFrameBytes <= 0 {
		o.MaxFrameBytes = 4 << 20
	}
	if o.ClientQueue <= 0 {
		o.ClientQueue = 1024
	}
	if o.ClientQueueBytes <= 0 {
		o.ClientQueueBytes = 64 << 20
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 64
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Gateway is the Jupyter kernel gateway API on an executor. It is safe for
// concurrent use.
type Gateway struct {
	e   *executor.Executor
	o   Options
	log *slog.Logger

	mu      sync.Mutex
	kernels map[string]*kernel // the kernels started through this API, by id
	closed  bool

	stats stats // for Stats

	// work is the calls and requests clients started: they outlive the
	// WebSocket that asked for them (a reloaded notebook does not interrupt its
	// running cell). Close waits for them.
	work sync.WaitGroup
}

// New returns the gateway API on e.
func New(e *executor.Executor, o Options) *Gateway {
	o = o.withDefaults()
	return &Gateway{e: e, o: o, log: o.Logger, kernels: map[string]*kernel{}}
}

// Route is one route of the API, for httpapi's route table: every route needs
// the token; POST routes take JSON bodies.
type Route struct {
	// Pattern is the http.ServeMux pattern.
	Pattern string
	// JSON says a body must be application/json.
	JSON bool
	// Serve answers the route.
	Serve http.HandlerFunc
	// Scoped says a scoped token may use the route; Ops are the operations
	// its scope must allow; Session says the {id} wildcard is a session's id
	// (a kernel's id is its session's), checked against the token's reach.
	Scoped  bool
	Ops     []tokens.Op
	Session bool
}

// Routes returns the API's routes.
func (g *Gateway) Routes() []Route {
	return []Route{
		{Pattern: "GET /api", Serve: g.version, Scoped: true},
		{Pattern: "GET /api/kernelspecs", Serve: g.kernelspecs, Scoped: true},
		{Pattern: "GET /api/kernelspecs/{name}", Serve: g.kernelspec, Scoped: true},
		{Pattern: "GET /api/kernels", Serve: g.listKernels, Scoped: true}, // lists what the token may see
		// A new kernel's id is a fresh uuid, out of any scope's patterns: the admin's.
		{Pattern: "POST /api/kernels", JSON: true, Serve: g.startKernel},
		{Pattern: "GET /api/kernels/{id}", Serve: g.getKernel, Scoped: true, Session: true},
		{Pattern: "DELETE /api/kernels/{id}", Serve: g.deleteKernel, Scoped: true, Session: true, Ops: []tokens.Op{tokens.OpClose}},
		{Pattern: "POST /api/kernels/{id}/interrupt", JSON: true, Serve: g.interrupt, Scoped: true, Session: true, Ops: []tokens.Op{tokens.OpExecute}},
		{Pattern: "POST /api/kernels/{id}/restart", JSON: true, Serve: g.restart, Scoped: true, Session: true, Ops: []tokens.Op{tokens.OpExecute}},
		// Typing into the channels needs OpExecute too (channels.go).
		{Pattern: "GET /api/kernels/{id}/channels", Serve: g.channels, Scoped: true, Session: true},
	}
}

// Close disconnects every client and waits for the work they started (the
// executor's own Close ends running calls). It does not close sessions.
func (g *Gateway) Close(ctx context.Context) error {
	g.mu.Lock()
	g.closed = true
	var clients []*client
	for _, k := range g.kernels {
		clients = append(clients, k.clientList()...)
	}
	g.mu.Unlock()
	for _, c := range clients {
		c.drop(closeGoingAway, "the server is shutting down")
	}
	done := make(chan struct{})
	go func() {
		g.work.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
