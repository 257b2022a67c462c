package mcpserver

import (
	"github.com/kernelbox/kernelbox/api"

	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kernelbox/kernelbox/calls"
)

// maxWaitSeconds caps get_call's wait_seconds: clients time tool calls out.
const maxWaitSeconds = 300

// StartArgs are start_code's arguments: execute_code's.
type StartArgs = ExecuteArgs

// StartResult is start_code's structured result.
type StartResult struct {
	CallID    string `json:"call_id" jsonschema:"The call's id: pass it to get_call."`
	SessionID string `json:"session_id" jsonschema:"The session the call runs in."`
}

// GetCallArgs are get_call's arguments.
type GetCallArgs struct {
	CallID      string  `json:"call_id" jsonschema:"The id start_code returned."`
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"Wait up to this many seconds (at most 300) for the call to end before answering. 0 answers at once."`
}

// GetCallResult is get_call's structured result.
type GetCallResult struct {
	CallID    string `json:"call_id"`
	SessionID string `json:"session_id"`
	State     string `json:"state" jsonschema:"queued, running or done."`
	// Output is the output so far while the call runs (clipped to the text budget).
	Output string `json:"output,omitempty" jsonschema:"The call's output so far, while it is queued or running (long output loses its middle)."`
	// Result is the budgeted result once the call is done, as execute_code gives it.
	Result *ExecuteResult `json:"result,omitempty" jsonschema:"The result once the call is done, as execute_code returns it."`
	// Error is why a done call could not run (it has no result then).
	Error      string `json:"error,omitempty" jsonschema:"Why the call could not run, when it is done without a result."`
	DurationMS int64  `json:"duration_ms"`
}

func (s *server) addCalls(srv *mcp.Server) {
	in := executeSchema()
	mcp.AddTool(srv, &mcp.Tool{
		Name:  "start_code",
		Title: "Start Python in a persistent kernel, without waiting",
		Description: fmt.Sprintf(`Start running Python code like execute_code (same arguments, same session state), but return at once with a call_id instead of waiting for the result. Use it for long work (a model fit, a crawl, a big download): the call keeps running on the server even if this conversation's connection drops.

Then call get_call with the call_id to see its output so far, or, once it is done, its result exactly as execute_code would return it; pass wait_seconds to wait for the end. The call's timeout is timeout_seconds (%s). Finished calls are kept for a while (by default an hour), then get_call says the call expired.`, s.timeoutText()),
		InputSchema: in,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(true), OpenWorldHint: boolPtr(true)},
	}, s.startCode)
	gin := mustSchema[GetCallArgs](nil)
	gin.Properties["wait_seconds"].Minimum = jsonschema.Ptr(0.0)
	gin.Properties["wait_seconds"].Maximum = jsonschema.Ptr(float64(maxWaitSeconds))
	mcp.AddTool(srv, &mcp.Tool{
		Name:  "get_call",
		Title: "Check a call started with start_code",
		Description: fmt.Sprintf(`The state of a call started with start_code: queued, running (with its output so far, up to about %s bytes), or done with its result as execute_code returns it. wait_seconds (up to %d) waits for the call to end first.`,
			count(s.opts.MaxTextBytes), maxWaitSeconds),
		InputSchema:  gin,
		OutputSchema: mustSchema[GetCallResult](outputTypes),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.getCall)
}

// startCode is the start_code handler.
func (s *server) startCode(ctx context.Context, req *mcp.CallToolRequest, args StartArgs) (*mcp.CallToolResult, *StartResult, error) {
	r, err := args.request()
	if err != nil {
		return nil, nil, err
	}
	c, err := s.calls.Start(ctx, r)
	if err != nil {
		return nil, nil, refusal(err)
	}
	s.log.Info("mcp start_code", "call", c.ID(), "session", r.SessionID)
	return text("Started call %s in session %q. Call get_call with call_id %q to see its output so far or its result (wait_seconds waits for the end).", c.ID(), r.SessionID, c.ID()),
		&StartResult{CallID: c.ID(), SessionID: r.SessionID}, nil
}

// getCall is the get_call handler.
func (s *server) getCall(ctx context.Context, req *mcp.CallToolRequest, args GetCallArgs) (*mcp.CallToolResult, *GetCallResult, error) {
	c, err := s.calls.Get(args.CallID)
	switch {
	case errors.Is(err, api.ErrCallExpired):
		return nil, nil, fmt.Errorf("%v: its result is gone; run the code again if you need it", err)
	case err != nil:
		return nil, nil, fmt.Errorf("no call %q: call_id must be an id start_code returned", args.CallID)
	}
	if args.WaitSeconds > 0 {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(min(args.WaitSeconds, maxWaitSeconds)*float64(time.Second)))
		_, _ = c.Wait(wctx)
		cancel()
	}
	info := c.Info(true, false)
	out := &GetCallResult{CallID: info.CallID, SessionID: info.SessionID, State: string(info.State), DurationMS: info.DurationMS}
	head := fmt.Sprintf("Call %s in session %q: %s after %s.\n", info.CallID, info.SessionID, info.State, duration(info.DurationMS))
	if info.State != api.CallDone {
		out.Output = s.outputSoFar(c)
		body := out.Output
		if body == "" {
			body = "(no output yet)\n"
		}
		return text("%s%s\nCall get_call again (wait_seconds waits for the end).", head, body), out, nil
	}
	res, err := c.Final()
	if err != nil && res == nil {
		out.Error = refusal(err).Error()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: head + out.Error}}, IsError: true}, out, nil
	}
	a := s.render(res)
	out.Result = a.structured
	content := append([]mcp.Content{&mcp.TextContent{Text: head}}, a.content...)
	return &mcp.CallToolResult{Content: content, IsError: res.Status != api.StatusOK}, out, nil
}

// outputSoFar is the text of a running call's events, clipped to the text
// budget (its middle goes), with a note for events the log no longer holds.
func (s *server) outputSoFar(c *calls.Call) string {
	var b strings.Builder
	evs := c.Events()
	if len(evs) > 0 && evs[0].Seq > 1 {
		fmt.Fprintf(&b, "[... %d earlier events are no longer kept ...]\n", evs[0].Seq-1)
	}
	for _, ev := range evs {
		b.WriteString(eventText(ev.Event))
	}
	clipped, _ := clipMiddle(b.String(), s.opts.MaxTextBytes)
	return clipped
}
