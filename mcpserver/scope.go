package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/audit"
	"github.com/kernelbox/kernelbox/tokens"
)

// MCP over HTTP with a scoped token (docs/security.md): httpapi's guard has
// checked the token and put its principal in the request's context;
// WithPrincipal hands it to the MCP session's requests, and guard, one
// receiving middleware, holds every tool call and resource read to the
// token's reach, as httpapi's route table does for /v1: a session out of it
// is answered as a missing one. list_sessions lists what the token may see.

// toolRule is what a tool needs of a scoped token.
type toolRule struct {
	ops     []tokens.Op
	session bool // the tool acts on its "session_id" (default "default")
	call    bool // the tool acts on the session of its "call_id"
	creates bool // the tool may create its session (or "new_session_id")
	changes bool // the tool changes state: audited
}

var (
	ruleRead    = toolRule{session: true}
	ruleExecute = toolRule{ops: []tokens.Op{tokens.OpExecute}, session: true, creates: true, changes: true}
)

// toolRules are the tools' rules; a tool missing here is refused to scoped
// tokens.
var toolRules = map[string]toolRule{
	"execute_code":   ruleExecute,
	"start_code":     ruleExecute,
	"get_call":       {call: true},
	"list_sessions":  {},
	"list_templates": {},
	"reset_session":  {ops: []tokens.Op{tokens.OpExecute}, session: true, changes: true},
	"fork_session":   {ops: []tokens.Op{tokens.OpFork}, session: true, creates: true, changes: true},
	"list_files":     {ops: []tokens.Op{tokens.OpFiles}, session: true},
	"read_file":      {ops: []tokens.Op{tokens.OpFiles}, session: true},
	"write_file":     {ops: []tokens.Op{tokens.OpFiles}, session: true, creates: true, changes: true},
	"list_artifacts": ruleRead,
	"read_artifact":  ruleRead,
}

// principalKey is the key of a principal in auth.TokenInfo.Extra.
const principalKey = "kernelbox_principal"

// WithPrincipal wraps MCP's streamable HTTP handler h so that each request's
// tool calls see the principal httpapi's guard put in its context (the
// admin's when there is none). It also binds each MCP session to the token
// that opened it: another token's requests on it are refused by the SDK.
func WithPrincipal(h http.Handler) http.Handler {
	verify := func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		p := tokens.FromContext(r.Context())
		return &auth.TokenInfo{UserID: p.ID(), Extra: map[string]any{principalKey: p}}, nil
	}
	inner := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The guard has checked whatever token came, in either form; the
		// SDK's middleware wants "Bearer" and gets the principal, not the token.
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer principal")
		inner.ServeHTTP(w, r)
	})
}

// principalOf is the principal of an MCP request: the admin's over stdio.
func principalOf(req mcp.Request) *tokens.Principal {
	if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
		if p, ok := ex.TokenInfo.Extra[principalKey].(*tokens.Principal); ok {
			return p
		}
	}
	return tokens.Admin
}

// toolArgs are the arguments the guard reads of a tool call.
type toolArgs struct {
	SessionID    string `json:"session_id"`
	CallID       string `json:"call_id"`
	NewSessionID string `json:"new_session_id"`
	Template     string `json:"template"`
}

// guard is the receiving middleware that holds scoped tokens to their reach.
func (s *server) guard(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		p := principalOf(req)
		if p.IsAdmin() || s.opts.Tokens == nil {
			return next(ctx, method, req)
		}
		switch method {
		case "tools/call":
			ct, ok := req.(*mcp.CallToolRequest)
			if !ok {
				return next(ctx, method, req)
			}
			return s.guardTool(ctx, p, ct, func() (mcp.Result, error) { return next(ctx, method, req) })
		case "resources/read":
			rr, ok := req.(*mcp.ReadResourceRequest)
			if !ok {
				return next(ctx, method, req)
			}
			if session, ok := uriSession(rr.Params.URI); !ok || s.opts.Tokens.Access(p, session) != nil {
				s.audit(p, "resources/read", session, "refused", "out of the token's reach")
				return nil, mcp.ResourceNotFoundError(rr.Params.URI)
			}
		}
		return next(ctx, method, req)
	}
}

// guardTool checks one tool call of a scoped token, then runs it.
func (s *server) guardTool(ctx context.Context, p *tokens.Principal, ct *mcp.CallToolRequest, run func() (mcp.Result, error)) (mcp.Result, error) {
	name := ct.Params.Name
	rule, ok := toolRules[name]
	if !ok {
		s.audit(p, name, "", "refused", "tool not open to scoped tokens")
		return toolError("tool %q is not open to scoped tokens", name), nil
	}
	var a toolArgs
	_ = json.Unmarshal(ct.Params.Arguments, &a) // the tool itself refuses bad arguments
	if !p.Allows(rule.ops...) {
		s.audit(p, name, a.SessionID, "refused", "op out of scope")
		return toolError("token %q's scope does not allow this tool (ops %v)", p.Name(), p.Scope().Ops), nil
	}
	session := a.SessionID
	if rule.session && session == "" {
		session = DefaultSession
	}
	if rule.call {
		c, err := s.calls.Get(a.CallID)
		if err != nil {
			return run() // the tool answers an unknown call
		}
		if s.opts.Tokens.Access(p, c.SessionID()) != nil {
			s.audit(p, name, c.SessionID(), "refused", "out of the token's reach")
			return toolError("call %q: not found", a.CallID), nil
		}
		return run()
	}
	if session == "" {
		return run()
	}
	if err := s.opts.Tokens.Access(p, session); err != nil {
		s.audit(p, name, session, "refused", "out of the token's reach")
		return toolError("%v", err), nil
	}
	claimed := ""
	if rule.creates {
		id, template := session, a.Template
		if name == "fork_session" {
			id = a.NewSessionID
			if info, err := s.e.Session(session); err == nil {
				template = info.Template
			}
		}
		if c, refusal := s.claim(p, id, template); refusal != nil {
			s.audit(p, name, id, "refused", refusal.Error())
			return toolError("%v", refusal), nil
		} else if c {
			claimed = id
		}
	}
	res, err := run()
	if claimed != "" {
		s.opts.Tokens.Settle(claimed)
	}
	if rule.changes {
		s.audit(p, name, session, "ok", "")
	}
	return res, err
}

// claim claims session id for p when it does not exist yet.
func (s *server) claim(p *tokens.Principal, id, template string) (bool, error) {
	if _, err := s.e.Session(id); err == nil || id == "" {
		return false, s.opts.Tokens.Access(p, id)
	}
	template = s.e.TemplateFor(id, template) // a retired session's own when it names none
	if !p.Scope().AllowsTemplate(template) {
		return false, &scopeError{"token " + p.Name() + " may not create sessions from template " + template}
	}
	return s.opts.Tokens.Claim(p, id)
}

type scopeError struct{ msg string }

func (e *scopeError) Error() string { return e.msg }

// toolError is a tool's error answer.
func toolError(format string, args ...any) *mcp.CallToolResult {
	res := text(format, args...)
	res.IsError = true
	return res
}

// audit writes a line of the audit log for a scoped token's MCP request.
func (s *server) audit(p *tokens.Principal, tool, session, outcome, reason string) {
	s.opts.Audit.Write(audit.Record{Interface: "mcp", TokenID: p.ID(), TokenName: p.Name(), Route: tool, Session: session, Outcome: outcome, Reason: reason})
}

// uriSession is the session of a kernelbox:// resource URI.
func uriSession(uri string) (string, bool) {
	for _, prefix := range []string{artifactURIPrefix, fileURIPrefix} {
		if rest, ok := strings.CutPrefix(uri, prefix); ok {
			session, _, _ := strings.Cut(rest, "/")
			return session, session != ""
		}
	}
	return "", false
}

// visible is the sessions of list that the request's principal may see.
func (s *server) visible(req mcp.Request, list []api.SessionInfo) []api.SessionInfo {
	p := principalOf(req)
	if p.IsAdmin() || s.opts.Tokens == nil {
		return list
	}
	out := list[:0:0]
	for _, si := range list {
		if p.MaySee(si.ID, s.opts.Tokens.Owner(si.ID)) {
			out = append(out, si)
		}
	}
	return out
}
