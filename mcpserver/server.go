package mcpserver

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kernelbox/kernelbox/audit"
	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/tokens"
	"github.com/kernelbox/kernelbox/workspace"
)

// DefaultSession is the session execute_code uses when the call names none.
const DefaultSession = "default"

// Options configures the MCP server. The zero value works.
type Options struct {
	// MaxTextBytes caps the text of one tool answer: execute_code's stdout,
	// stderr, result and error together, and one read_artifact page. Longer text
	// loses its middle, with a note saying how much was dropped. Defaults to
	// 20,000.
	MaxTextBytes int

	// MaxImageBytes caps the images (decoded bytes) one execute_code answer
	// returns inline; images beyond it are returned as links to their artifacts.
	// It also caps the rich data (images, HTML) kept in the structured result and
	// the image read_artifact returns inline. Defaults to 256 KiB.
	MaxImageBytes int

	// MaxResourceBytes caps an artifact read as a resource (resources/read).
	// Defaults to 8 MiB.
	MaxResourceBytes int

	// MaxWriteBytes caps the content of one write_file. Defaults to 1 MiB
	// (DefaultMaxWriteBytes); the workspace's per-file limit applies as well.
	MaxWriteBytes int

	// ProgressInterval is the least time between two progress notifications of
	// one call. Defaults to 250 milliseconds.
	ProgressInterval time.Duration

	// DefaultTimeout is the executor's default call timeout. It is only quoted in
	// the tool descriptions; zero describes it as the server's default.
	DefaultTimeout time.Duration

	// Version is the server version reported to clients. Defaults to "dev".
	Version string

	// Logger receives the server's logs (and the SDK's). Defaults to discarding
	// them.
	Logger *slog.Logger

	// Calls registers the calls of start_code, so that get_call finds them.
	// Share the HTTP API's registry to see one list of calls; its owner closes
	// it. Defaults to a private registry with default options, built on the
	// executor.
	Calls *calls.Registry

	// Tokens, when set, holds scoped tokens' requests (over HTTP, through
	// WithPrincipal) to their reach (scope.go). Defaults to none: every
	// request is the operator's.
	Tokens *tokens.Store

	// Audit, when set, gets a line per scoped token's tool call that changes
	// state or is refused. Defaults to none.
	Audit *audit.Log
}

func (o *Options) setDefaults() {
	if o.MaxTextBytes <= 0 {
		o.MaxTextBytes = 20_000
	}
	if o.MaxImageBytes <= 0 {
		o.MaxImageBytes = 256 << 10
	}
	if o.MaxResourceBytes <= 0 {
		o.MaxResourceBytes = 8 << 20
	}
	if o.MaxWriteBytes <= 0 {
		o.MaxWriteBytes = DefaultMaxWriteBytes
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = 250 * time.Millisecond
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// server holds what the tool handlers share. It is safe for concurrent use: the
// executor and the workspace manager are, and the rest is read-only.
type server struct {
	e     *executor.Executor
	ws    *workspace.Manager
	calls *calls.Registry
	opts  Options
	log   *slog.Logger
}

// New returns an MCP server whose tools run code on e and read artifacts from ws:
//
//	execute_code    run Python in a session's persistent kernel (inputs, timeout, progress)
//	start_code      start code like execute_code and return a call_id at once
//	get_call        a started call's state, output so far, and result when done
//	list_sessions   the live sessions and their state
//	reset_session   a fresh kernel for a session (variables gone, files kept)
//	fork_session    a new session with a copy of another one's files and variables
//	list_artifacts  a session's artifacts, with their resource URIs
//	read_artifact   one artifact: text by pages, images inline, other files as links
//	list_files      a directory of a session's working directory
//	read_file       one session file: text by pages, images inline, other files as links
//	write_file      write a text file into a session (creating it)
//
// and the resource templates kernelbox://artifacts/{session}/{+path} and
// kernelbox://files/{session}/{+path}. ws may be nil, in which case the artifact
// tools and their resource template are left out. The files tools go through
// the executor (Executor.ListFiles, GetFile, PutFile), as the HTTP files API
// does: the policy's files.read and files.write decide whether they may run.
//
// The server may be run on many transports at once; every connection shares e.
func New(e *executor.Executor, ws *workspace.Manager, opts Options) *mcp.Server {
	opts.setDefaults()
	if opts.Calls == nil {
		opts.Calls = calls.New(e, calls.Options{Logger: opts.Logger})
	}
	s := &server{e: e, ws: ws, calls: opts.Calls, opts: opts, log: opts.Logger}
	srv := mcp.NewServer(&mcp.Implementation{Name: "kernelbox", Title: "kernelbox: stateful Python kernels", Version: opts.Version},
		&mcp.ServerOptions{
			Instructions: s.instructions(),
			Logger:       opts.Logger,
			// No logging capability: logs go to the operator (stderr), not the model.
			Capabilities: &mcp.ServerCapabilities{},
		})
	srv.AddReceivingMiddleware(s.guard)
	s.addExecute(srv)
	s.addCalls(srv)
	s.addSessions(srv)
	s.addDurable(srv)
	if ws != nil {
		s.addArtifacts(srv)
	}
	s.addFiles(srv)
	return srv
}

// instructions is the server-level guidance a client may put in the model's context.
func (s *server) instructions() string {
	return fmt.Sprintf(`kernelbox runs Python in persistent Jupyter (IPython) kernels.

Use execute_code to run code. Each session_id (default %q) is one long-lived kernel: variables, imports and loaded data persist between calls with the same session_id until reset_session, a crash or an idle timeout (a result with state_lost: true says the variables are gone; re-run your setup). Work step by step: load data once, then inspect and transform it in later calls.

Files: pass host files in "inputs" and read them at inputs/<basename>. Save deliverables (plots, tables, reports) under outputs/; each new or changed file there becomes an artifact, listed in the result and readable with read_artifact. Figures shown with plt.show() or display() come back as images. To hand a session a small text file (a config, a CSV you wrote), use write_file; list_files and read_file show what is in its working directory.

Long work (a model fit, a crawl): start it with start_code, which returns a call_id at once, and check it with get_call (its output so far, then its result); the call runs on even if the connection drops.

Answers are budgeted: about %s bytes of text per call (long output loses its middle: print summaries such as df.head() or df.describe(), not whole data) and %s of inline images.`,
		DefaultSession, count(s.opts.MaxTextBytes), humanBytes(int64(s.opts.MaxImageBytes)))
}

// timeoutText describes the default timeout for the tool descriptions.
func (s *server) timeoutText() string {
	d := s.opts.DefaultTimeout
	switch {
	case d <= 0:
		return "default: the server's, 5 minutes unless configured"
	case d%time.Hour == 0:
		return fmt.Sprintf("default: %d hour(s)", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("default: %d minutes", d/time.Minute)
	default:
		return fmt.Sprintf("default: %g seconds", d.Seconds())
	}
}

func boolPtr(b bool) *bool { return &b }
