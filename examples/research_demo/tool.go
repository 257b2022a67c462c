package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/permissions"
)

// toolName is the analyst's one tool.
const toolName = "sandbox_execute"

// toolDescription tells a model what the tool does and what the sandbox holds.
const toolDescription = "Run Python code in a stateful Jupyter kernel. Variables, imports and DataFrames " +
	"persist between calls with the same session_id. Each path in inputs is copied into the session " +
	"before the code runs and is found at inputs/<basename>; every path is checked against the " +
	"permission policy and a denied path stops the call. Files the code writes under outputs/ are " +
	"returned as artifacts. pandas and matplotlib.pyplot are already imported as pd and plt; there is no network."

// toolParameters is the JSON schema of the tool's arguments: those of the MCP execute
// tool.
const toolParameters = `{
  "type": "object",
  "properties": {
    "code": {"type": "string", "description": "Python code to run"},
    "session_id": {"type": "string", "description": "session to run in; calls with the same id share state"},
    "inputs": {"type": "array", "items": {"type": "string"}, "description": "host files to stage into inputs/ first"}
  },
  "required": ["code", "session_id"]
}`

// toolArgs are one call's arguments, as a model sends them.
type toolArgs struct {
	Code      string   `json:"code"`
	SessionID string   `json:"session_id"`
	Inputs    []string `json:"inputs,omitempty"`
}

// tool runs sandbox_execute calls. keyTool (keys.go) is the real one: the
// call goes over HTTP with the analyst's scoped key, and the executor checks it
// against the policy (permissions.ExecuteCapabilities: python.exec.stateful,
// and filesystem.read on each input) before anything is staged or run; tests
// use fakes.
type tool interface {
	execute(ctx context.Context, args toolArgs) (*api.Result, error)
}

func toolSignature() string {
	var caps []string
	for _, c := range permissions.ExecuteCapabilities() {
		s := c.Name
		if c.TargetArg != "" {
			s += " on each of " + c.TargetArg
		}
		caps = append(caps, s)
	}
	return toolName + "(code, session_id, inputs), needing " + strings.Join(caps, " and ")
}

// outcome is one tool call's result as the agents and the printer see it.
type outcome struct {
	res    *api.Result // nil when the call could not run
	denied []string    // the policy's decisions, each "deny <what>: <why>"
	ms     int64       // how long the call took, as the analyst saw it
	err    error       // why the call could not run, including a denial
}

// call runs one tool call and sorts out its result: a denial is an outcome the agent
// can read and recover from, as are errors raised by the code; other errors (the
// backend failed, the executor is closed) end the run.
func call(ctx context.Context, t tool, args toolArgs) (outcome, error) {
	start := time.Now()
	res, err := t.execute(ctx, args)
	o := outcome{res: res, err: err, ms: time.Since(start).Milliseconds()}
	var denied *permissions.DeniedError
	var refused *client.APIError
	switch {
	case err == nil:
	case errors.As(err, &denied):
		for _, d := range denied.Decisions {
			o.denied = append(o.denied, d.String())
		}
	case errors.As(err, &refused) && errors.Is(err, api.ErrDenied):
		// Over HTTP (the analyst's key) the decisions come as the message:
		// "permission denied: permission denied: <what>: <why>".
		msg, sep := refused.Message, api.ErrDenied.Error()+": "
		if i := strings.LastIndex(msg, sep); i >= 0 {
			msg = msg[i+len(sep):]
		}
		o.denied = []string{"deny " + msg}
	case errors.Is(err, api.ErrInvalidRequest):
		// The caller's mistake (say, empty code): the agent can fix it.
	default:
		return o, fmt.Errorf("%s: %w", toolName, err)
	}
	return o, nil
}

// status is the outcome in one word.
func (o outcome) status() string {
	switch {
	case o.denied != nil:
		return "denied"
	case o.res != nil:
		return string(o.res.Status)
	default:
		return "invalid"
	}
}

// forModel is the tool result a model reads: the result's text fields, clipped, and
// artifact paths rather than their content.
func (o outcome) forModel() string {
	type artifact struct {
		Name string `json:"name"`
		Path string `json:"path"`
	}
	m := struct {
		Status    string         `json:"status"`
		Stdout    string         `json:"stdout,omitempty"`
		Stderr    string         `json:"stderr,omitempty"`
		Result    string         `json:"result,omitempty"`
		Error     *api.ErrorInfo `json:"error,omitempty"`
		Denied    []string       `json:"denied,omitempty"`
		Problem   string         `json:"problem,omitempty"`
		Artifacts []artifact     `json:"artifacts,omitempty"`
		Notes     []string       `json:"notes,omitempty"`
	}{Status: o.status()}
	m.Denied = append(m.Denied, o.denied...)
	if o.res == nil && o.err != nil {
		m.Problem = o.err.Error()
	}
	if r := o.res; r != nil && o.denied == nil {
		m.Stdout, m.Stderr, m.Result = clip(r.Stdout, 6000), clip(r.Stderr, 2000), clip(r.Result, 2000)
		m.Error, m.Notes = r.Error, r.Notes
		for _, a := range r.Artifacts {
			m.Artifacts = append(m.Artifacts, artifact{a.Name, a.Path})
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Sprintf(`{"status":"error","problem":%q}`, err.Error())
	}
	return string(b)
}

// clip keeps the end of s, where a traceback's cause and a cell's last prints are.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "[… " + fmt.Sprint(len(s)-n) + " bytes cut …]" + s[len(s)-n:]
}
