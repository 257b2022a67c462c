package mcpserver

import (
	"github.com/kernelbox/kernelbox/api"

	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SessionList is list_sessions' structured result.
type SessionList struct {
	Sessions []api.SessionInfo `json:"sessions" jsonschema:"The live sessions, sorted by id."`
}

// SessionArgs name one session.
type SessionArgs struct {
	SessionID string `json:"session_id" jsonschema:"The session id, as given to execute_code (\"default\" when it was left out)."`
}

func (s *server) addSessions(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{
		Name:  "list_sessions",
		Title: "List kernel sessions",
		Description: `List the live sessions (one kernel each) with their state: new (no kernel yet), starting, idle, busy (running a call) or dead (its kernel is gone; the next call starts a fresh one and reports state_lost), and how many calls each has run and has queued.

A session that is not listed has no live kernel: execute_code with its id starts a new one (its files from earlier calls are still there unless it was closed).`,
		Annotations: &mcp.ToolAnnotations{Title: "List kernel sessions", ReadOnlyHint: true, OpenWorldHint: boolPtr(false)},
	}, s.listSessions)

	mcp.AddTool(srv, &mcp.Tool{
		Name:        "list_templates",
		Title:       "List session templates",
		Description: `List the session templates this server offers: what each is for, its kernel language, what its fresh kernels have already imported (preload), its memory and CPU limits, and whether kernels are kept warm. Pass a template's name as execute_code's (or start_code's) template on a session's first call; the session keeps it.`,
		Annotations: &mcp.ToolAnnotations{Title: "List session templates", ReadOnlyHint: true, OpenWorldHint: boolPtr(false)},
	}, s.listTemplates)

	in := mustSchema[SessionArgs](nil)
	in.Properties["session_id"].Pattern = api.SessionIDPattern
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "reset_session",
		Title:       "Restart a session's kernel",
		Description: `Give a session a fresh kernel: all its variables, imports and loaded data are gone; its files (inputs/, outputs/, anything written to the working directory) and its artifacts stay. Use it to recover from a broken state or to free memory. It waits for the session's queued calls first.`,
		InputSchema: in,
		Annotations: &mcp.ToolAnnotations{Title: "Restart a session's kernel", DestructiveHint: boolPtr(true), IdempotentHint: true, OpenWorldHint: boolPtr(false)},
	}, s.resetSession)
}

func (s *server) listSessions(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, *SessionList, error) {
	list := s.visible(req, s.e.Sessions())
	if len(list) == 0 {
		return text("No live sessions. execute_code starts one (session_id defaults to %q).", DefaultSession), &SessionList{Sessions: list}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d live session(s):\n", len(list))
	for _, si := range list {
		fmt.Fprintf(&b, "- %s: %s, template %s, %d calls, execution_count %d", si.ID, si.State, si.Template, si.Calls, si.ExecutionCount)
		if si.Queued > 0 {
			fmt.Fprintf(&b, ", %d queued", si.Queued)
		}
		if !si.LastActivity.IsZero() {
			fmt.Fprintf(&b, ", last active %s ago", time.Since(si.LastActivity).Round(time.Second))
		}
		b.WriteByte('\n')
	}
	return text("%s", b.String()), &SessionList{Sessions: list}, nil
}

// TemplateList is list_templates' structured result.
type TemplateList struct {
	Templates []api.TemplateInfo `json:"templates" jsonschema:"The templates, the default first, with their effective settings."`
}

func (s *server) listTemplates(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, *TemplateList, error) {
	list := s.e.TemplateInfos()
	ts := s.e.Templates()
	var b strings.Builder
	fmt.Fprintf(&b, "%d template(s); pass one as execute_code's template on a session's first call:\n", len(list))
	for i, t := range list {
		fmt.Fprintf(&b, "- %s: ", t.Name)
		if t.Description != "" {
			b.WriteString(t.Description)
		} else {
			b.WriteString("(no description)")
		}
		fmt.Fprintf(&b, ". Kernel %s", t.Kernel)
		if t.MemoryBytes > 0 {
			fmt.Fprintf(&b, ", memory %d MiB", t.MemoryBytes>>20)
		}
		if t.CPUs > 0 {
			fmt.Fprintf(&b, ", %g CPUs", t.CPUs)
		}
		if t.Preload && i < len(ts) {
			fmt.Fprintf(&b, ". Fresh kernels already ran: %s", oneLine(ts[i].Preload, 300))
		}
		if t.Warm > 0 {
			fmt.Fprintf(&b, ". %d of %d kernels warm", t.WarmReady, t.Warm)
		}
		if len(t.Data) > 0 {
			fmt.Fprintf(&b, ". Data at data/%s", strings.Join(t.Data, ", data/"))
		}
		if t.Checkpoint != "" {
			b.WriteString(". Variables are saved after each call and come back if the kernel dies")
		}
		b.WriteString(networkText(t.Network))
		b.WriteString(".\n")
	}
	return text("%s", b.String()), &TemplateList{Templates: list}, nil
}

// oneLine joins code's lines with "; " and cuts it at n bytes.
func oneLine(code string, n int) string {
	var parts []string
	for _, l := range strings.Split(code, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	s := strings.Join(parts, "; ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

func (s *server) resetSession(ctx context.Context, req *mcp.CallToolRequest, args SessionArgs) (*mcp.CallToolResult, any, error) {
	err := s.e.ResetSession(ctx, args.SessionID)
	switch {
	case errors.Is(err, api.ErrNotFound):
		return nil, nil, fmt.Errorf("no live session %q (list_sessions shows them); there is nothing to reset, and execute_code with this id starts a fresh kernel anyway", args.SessionID)
	case err != nil:
		return nil, nil, fmt.Errorf("reset session %q: %v", args.SessionID, err)
	}
	return text("Session %q has a fresh kernel: its variables are gone, its files and artifacts are kept.", args.SessionID), nil, nil
}

// text is a tool result holding one text block.
func text(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// networkText tells a model what a template's sessions can reach.
func networkText(n *api.NetworkInfo) string {
	if n == nil || n.Mode != "allowlist" {
		return ". No network (no DNS, no route; only the kernel's loopback)"
	}
	return ". Network: only " + strings.Join(n.Allow, ", ") + " (HTTP and HTTPS through kernelbox's proxy, ports 80/443 unless given; anything else gets a 403 naming the rule)"
}
