package mcpserver_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/mcpserver"
	"github.com/kernelbox/kernelbox/workspace"
)

// Example serves an executor over MCP and calls it from an SDK client on an
// in-memory transport. The executor here has no backend, so code execution is
// disabled and execute_code answers with a tool error saying how to enable it; with
// the local or docker backend the same call returns the cell's output.
func Example() {
	dir, err := os.MkdirTemp("", "kernelbox-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ws, err := workspace.New(workspace.Options{Root: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer ws.Close()
	e, err := executor.New(executor.Options{Workspace: ws})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()

	srv := mcpserver.New(e, ws, mcpserver.Options{})
	// `kernelbox mcp` runs the server on stdio instead:
	//	srv.Run(ctx, &mcp.StdioTransport{})
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "example"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tools.Tools {
		fmt.Println(t.Name)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "execute_code",
		Arguments: map[string]any{"code": "x = 41\nx + 1", "session_id": "demo"},
	})
	if err != nil {
		log.Fatal(err) // only protocol failures; refusals are tool errors
	}
	text := res.Content[0].(*mcp.TextContent).Text
	fmt.Println(res.IsError, strings.HasPrefix(text, "code execution is disabled"))
	// Output:
	// execute_code
	// fork_session
	// get_call
	// list_artifacts
	// list_files
	// list_sessions
	// list_templates
	// read_artifact
	// read_file
	// reset_session
	// start_code
	// write_file
	// true true
}
