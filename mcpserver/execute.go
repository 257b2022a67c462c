package mcpserver

import (
	"github.com/kernelbox/kernelbox/api"

	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kernelbox/kernelbox/permissions"
)

// ExecuteArgs are execute_code's arguments.
type ExecuteArgs struct {
	Code           string   `json:"code" jsonschema:"Python source to run, as in a notebook cell: the value of the last expression is returned as result, IPython %magics and !shell commands work. input() is not available."`
	SessionID      string   `json:"session_id,omitempty" jsonschema:"The session (kernel) to run in; calls with the same session_id share variables, imports and files. Defaults to \"default\"."`
	Inputs         []string `json:"inputs,omitempty" jsonschema:"Host file paths (absolute, or relative to the server's working directory) to copy into the session before the code runs; each appears at inputs/<basename> (read it there, not at the host path). Every path is checked against the permission policy: a denied path fails the whole call and nothing runs."`
	TimeoutSeconds float64  `json:"timeout_seconds,omitempty" jsonschema:"Time limit for this call in seconds. When it passes the code is interrupted and the result has status timeout; variables are kept unless state_lost is true."`
	Template       string   `json:"template,omitempty" jsonschema:"Template of a new session (list_templates says what each offers: its language, preloaded libraries, limits). Only a session's first call (or its creation) chooses; later calls may leave it out, and naming another one fails. Defaults to \"default\"."`
	MaxWaitSeconds float64  `json:"max_wait_seconds,omitempty" jsonschema:"Optional bound on the whole call in seconds: waiting behind other calls of the session, starting its kernel and running. If the code cannot start in time it does not run (status timeout); timeout_seconds alone counts only the run."`
}

// ExecuteResult is execute_code's structured result: the fields of the HTTP API's
// Result, with the answer's budgets applied (see Options).
type ExecuteResult struct {
	SessionID      string `json:"session_id" jsonschema:"The session the code ran in."`
	Status         string `json:"status" jsonschema:"ok, error (the code raised), timeout (interrupted at the time limit), kernel_died (the kernel crashed, for example out of memory; the next call gets a fresh one) or denied."`
	ExecutionCount int    `json:"execution_count,omitempty" jsonschema:"The kernel's execution counter after this call."`
	// Outputs are the cell's outputs in nbformat v4 shape; rich data over the
	// budget is left out (see Notes).
	Outputs []api.Output   `json:"outputs" jsonschema:"The cell's outputs in nbformat v4 shape, in order. Rich data over the size budget is left out, as the notes say."`
	Stdout  string         `json:"stdout" jsonschema:"Standard output (cut in the middle when over the budget)."`
	Stderr  string         `json:"stderr" jsonschema:"Standard error (cut in the middle when over the budget)."`
	Result  string         `json:"result,omitempty" jsonschema:"text/plain form of the value of the last expression, if any."`
	Error   *api.ErrorInfo `json:"error,omitempty" jsonschema:"The exception, timeout, kernel death or denial, for every status but ok."`
	// Artifacts are the files this call created or changed.
	Artifacts      []ArtifactInfo `json:"artifacts" jsonschema:"Files this call created or changed under outputs/, and saved figures (display/...). Read them with read_artifact or their uri."`
	Truncated      bool           `json:"truncated" jsonschema:"Set when output was dropped, by the kernel server's caps or to fit this answer; truncation_note says what and how much."`
	TruncationNote string         `json:"truncation_note,omitempty"`
	StateLost      bool           `json:"state_lost" jsonschema:"Set when the session's variables are gone (its kernel was restarted): re-run any setup code."`
	Notes          []string       `json:"notes,omitempty"`
	DurationMS     int64          `json:"duration_ms"`
}

// ArtifactInfo is one artifact as the tools report it.
type ArtifactInfo struct {
	Name   string `json:"name" jsonschema:"Path relative to the session's artifacts: the path under outputs/, or display/<file> for a saved figure."`
	URI    string `json:"uri" jsonschema:"Resource URI, readable with resources/read; read_artifact takes session_id and name instead."`
	Path   string `json:"path" jsonschema:"Host path of the artifact file."`
	Size   int64  `json:"size"`
	MIME   string `json:"mime"`
	SHA256 string `json:"sha256,omitempty"`
	// Partial: the file was still being written when collected; a later call
	// collects it again.
	Partial bool `json:"partial,omitempty" jsonschema:"The file was still being written when it was collected (by a background thread or process); a later call collects it again."`
}

// executeSchema is the input schema of execute_code and start_code.
func executeSchema() *jsonschema.Schema {
	in := mustSchema[ExecuteArgs](nil)
	in.Properties["session_id"].Pattern = api.SessionIDPattern
	in.Properties["session_id"].Description += " " + api.SessionIDRule + "."
	in.Properties["code"].MinLength = jsonschema.Ptr(1)
	in.Properties["timeout_seconds"].Minimum = jsonschema.Ptr(0.0)
	in.Properties["template"].Pattern = api.TemplateNamePattern
	return in
}

// outputTypes describes an nbformat output in the output schemas of execute_code
// and get_call.
var outputTypes = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[api.Output](): {Type: "object", Description: "One nbformat v4 output: stream, display_data, execute_result or error."},
}}

// request turns the arguments of execute_code or start_code into a Request (the
// default session when none is named); it refuses a timeout out of range.
func (a ExecuteArgs) request() (api.Request, error) {
	if a.SessionID == "" {
		a.SessionID = DefaultSession
	}
	if a.TimeoutSeconds < 0 || a.TimeoutSeconds > 1e7 {
		return api.Request{}, errors.New("invalid request: timeout_seconds must be between 0 and 10,000,000; nothing was run")
	}
	if a.MaxWaitSeconds < 0 || a.MaxWaitSeconds > 1e7 {
		return api.Request{}, errors.New("invalid request: max_wait_seconds must be between 0 and 10,000,000; nothing was run")
	}
	return api.Request{
		SessionID: a.SessionID,
		Code:      a.Code,
		Inputs:    a.Inputs,
		Template:  a.Template,
		Timeout:   time.Duration(a.TimeoutSeconds * float64(time.Second)),
		MaxWait:   time.Duration(a.MaxWaitSeconds * float64(time.Second)),
	}, nil
}

func (s *server) addExecute(srv *mcp.Server) {
	in := executeSchema()
	out := mustSchema[ExecuteResult](outputTypes)
	mcp.AddTool(srv, &mcp.Tool{
		Name:  "execute_code",
		Title: "Run Python in a persistent kernel",
		Description: fmt.Sprintf(`Run Python code in a persistent Jupyter (IPython) kernel and return its output.

State: each session_id (default %q) is one long-lived kernel. Variables, imports, loaded DataFrames and files persist between calls with the same session_id, until reset_session, a kernel crash or an idle timeout; a result with state_lost: true means the variables are gone (files stay). Different session_ids are independent.

Files: the working directory is the session's directory. Host files listed in "inputs" are copied in before the code runs and appear at inputs/<basename>. Write deliverables (plots, CSVs, reports) under outputs/: every new or changed file there becomes an artifact, listed in the result with a URI and readable with read_artifact. Figures shown with plt.show() or display() come back as images and are saved as artifacts under display/.

Limits: a call is interrupted after timeout_seconds (%s) and returns status "timeout"; the variables survive unless state_lost is set. The text of an answer is capped at about %s bytes: longer stdout/stderr loses its middle, the result says truncated: true and a note says how much was dropped, so print summaries (df.head(), df.shape, len(x)) rather than whole data, or write big output to a file in outputs/ and page through it with read_artifact. Images up to %s in total are returned inline, larger ones as links to their artifacts. stdin is closed (input() fails); a policy decides which host files may be inputs, and a denied input fails the call with the rule that denied it.

Returns a text summary (status, stdout, stderr, result, error, artifacts), images, and a structured result with status ok, error, timeout, kernel_died or denied.`,
			DefaultSession, s.timeoutText(), count(s.opts.MaxTextBytes), humanBytes(int64(s.opts.MaxImageBytes))),
		InputSchema:  in,
		OutputSchema: out,
		Annotations: &mcp.ToolAnnotations{
			Title:           "Run Python in a persistent kernel",
			DestructiveHint: boolPtr(true),
			OpenWorldHint:   boolPtr(true),
		},
	}, s.execute)
}

// mustSchema infers the JSON schema of T; it panics on a type the schema package
// cannot describe, a programming error caught by any test.
func mustSchema[T any](opts *jsonschema.ForOptions) *jsonschema.Schema {
	sc, err := jsonschema.For[T](opts)
	if err != nil {
		panic(err)
	}
	return sc
}

// execute is the execute_code handler.
func (s *server) execute(ctx context.Context, req *mcp.CallToolRequest, args ExecuteArgs) (*mcp.CallToolResult, *ExecuteResult, error) {
	r, err := args.request()
	if err != nil {
		return nil, nil, err
	}
	var res *api.Result
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		p := startProgress(ctx, req.Session, tok, s.opts.ProgressInterval)
		res, err = s.e.ExecuteStream(ctx, r, p.event)
		p.stop()
	} else {
		res, err = s.e.Execute(ctx, r)
	}
	if err != nil {
		s.log.Info("mcp execute_code refused", "session", args.SessionID, "err", err)
		return nil, nil, refusal(err)
	}
	a := s.render(res)
	return &mcp.CallToolResult{Content: a.content, IsError: res.Status != api.StatusOK}, a.structured, nil
}

// refusal turns an error from Execute (the call did not run) into the text of a
// tool error: what happened, that nothing ran, and what to do about it. The advice
// is keyed by api's error codes, the one list every front end shares.
func refusal(err error) error {
	var denied *permissions.DeniedError
	if errors.As(err, &denied) {
		var b strings.Builder
		b.WriteString("Refused by the permission policy; nothing was run.\n")
		for _, d := range denied.Decisions {
			b.WriteString("- " + d.String() + "\n")
		}
		b.WriteString("Only files the policy allows can be inputs (by default: files under the server's working directory, never keys or credentials). Drop the denied input, or ask the user to allow it in the policy.")
		return errors.New(b.String())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("the call was canceled before it ran (%v)", err)
	}
	code, _ := api.CodeOf(err)
	if advice, ok := refusalAdvice[code]; ok {
		return fmt.Errorf(advice, err)
	}
	return fmt.Errorf("the call could not run: %v", err)
}

// refusalAdvice is what a model should do about each kind of refusal; %v is the error.
var refusalAdvice = map[api.Code]string{
	api.CodeInvalidRequest:  "%v. Nothing was run; fix the arguments and call again",
	api.CodeDisabled:        "%v. Nothing was run; tell the user, who must restart kernelbox with a backend",
	api.CodeTooManySessions: "%v. Nothing was run; reuse a live session_id (see list_sessions)",
	api.CodeQueueFull:       "%v. Nothing was run; wait for the session's running calls, or use another session_id",
	api.CodeBackend:         "the kernel could not be started, so nothing was run: %v. Try again; if it keeps failing, tell the user",
	api.CodeSessionClosed:   "%v: the session was closed or reset while the call waited, so nothing was run; call again",
	api.CodeShuttingDown:    "%v: kernelbox is shutting down; nothing was run",
	api.CodeCanceled:        "the call was canceled before it ran (%v)",
}
