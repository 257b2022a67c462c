package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kernelbox/kernelbox/api"
)

// ForkArgs name the session to copy and the new one.
type ForkArgs struct {
	SessionID string `json:"session_id" jsonschema:"The session to copy."`
	NewID     string `json:"new_session_id" jsonschema:"The new session's id; it must not exist."`
}

func (s *server) addDurable(srv *mcp.Server) {
	in := mustSchema[ForkArgs](nil)
	in.Properties["session_id"].Pattern = api.SessionIDPattern
	in.Properties["new_session_id"].Pattern = api.SessionIDPattern
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "fork_session",
		Title:       "Copy a session into a new one",
		Description: `Make a new session that starts where another one is now: the same template, a copy of its files, and its variables (saved and restored name by name; the answer lists any that could not be copied, such as generators or open connections). The original is untouched and keeps running. Use it to try two analyses from one loaded dataset: fork, then run each branch with execute_code on its own session_id. Python sessions only, on the local and docker backends.`,
		InputSchema: in,
		Annotations: &mcp.ToolAnnotations{Title: "Copy a session into a new one", OpenWorldHint: boolPtr(false)},
	}, s.forkSession)
}

func (s *server) forkSession(ctx context.Context, req *mcp.CallToolRequest, args ForkArgs) (*mcp.CallToolResult, *api.ResumeResult, error) {
	res, err := s.e.Fork(ctx, args.SessionID, args.NewID)
	switch {
	case errors.Is(err, api.ErrNotFound):
		return nil, nil, fmt.Errorf("no live session %q (list_sessions shows them)", args.SessionID)
	case err != nil:
		return nil, nil, fmt.Errorf("fork session %q into %q: %v", args.SessionID, args.NewID, err)
	}
	if res.StateLost {
		return text("Session %q was created with %q's files, but its variables could not be restored: %s", args.NewID, args.SessionID, res.Reason), &res, nil
	}
	msg := fmt.Sprintf("Session %q is a copy of %q: its files and %d variables", args.NewID, args.SessionID, len(res.StateRestored.Restored))
	if len(res.StateRestored.Restored) > 0 {
		msg += " (" + strings.Join(res.StateRestored.Restored, ", ") + ")"
	}
	if nr := res.StateRestored.NotRestored; len(nr) > 0 {
		names := make([]string, 0, len(nr))
		for n, why := range nr {
			names = append(names, n+": "+why)
		}
		sort.Strings(names)
		msg += ". Not copied (re-create them in the new session): " + strings.Join(names, "; ")
	}
	return text("%s.", msg), &res, nil
}
