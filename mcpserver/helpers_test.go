package mcpserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
	"github.com/kernelbox/kernelbox/mcpserver"
	"github.com/kernelbox/kernelbox/workspace"
)

// env is an executor on the local backend with its own workspace, and a policy
// whose workdir is Data (where tests put input files).
type env struct {
	E    *executor.Executor
	WS   *workspace.Manager
	Data string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	te := testexec.Local(t, nil)
	return &env{E: te.Exec, WS: te.WS, Data: te.Data}
}

// connect runs srv on an in-memory transport and returns a client session on it.
func connect(t testing.TB, srv *mcp.Server, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, opts)
	cs, err := c.Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// client returns a client session on a new server over env.
func (e *env) client(t testing.TB, opts mcpserver.Options) *mcp.ClientSession {
	t.Helper()
	return connect(t, mcpserver.New(e.E, e.WS, opts), nil)
}

func call(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err, "a tool call never fails at the protocol level")
	return res
}

// textOf joins the text blocks of a tool result.
func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// structured returns a tool result's structured content as a map.
func structured(t testing.TB, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	m, ok := res.StructuredContent.(map[string]any)
	require.True(t, ok, "structured content is an object: %T", res.StructuredContent)
	return m
}
