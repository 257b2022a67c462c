package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// TestMCPStdio drives `kernelbox mcp` as a desktop client would: a child process
// speaking MCP on stdin/stdout.
func TestMCPStdio(t *testing.T) {
	py := testenv.Jupyter(t)
	bin := kernelboxBin(t)
	ws, data := testDirs(t)
	stderr := &lockedBuffer{}
	cmd := exec.Command(bin, "mcp", "--backend", "local", "--python", py, "--workspace", ws, "--workdir", data)
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 20 * time.Second}, nil)
	require.NoError(t, err, stderr.String())
	exerciseMCP(t, cs, data)
	// Closing stdin ends the server, which stops its kernels and exits cleanly.
	require.NoError(t, cs.Close(), "kernelbox mcp exits cleanly when stdin closes; its log:\n%s", stderr)
	assert.Contains(t, stderr.String(), "serving MCP on stdio", "logs go to stderr")
}

// TestMCPHTTP drives MCP over streamable HTTP at /mcp of `kernelbox serve`, with the
// bearer token, and checks that /metrics moves.
func TestMCPHTTP(t *testing.T) {
	s := startServe(t)

	status, body := s.get(t, "/mcp", false)
	assert.Equal(t, http.StatusUnauthorized, status, body)
	status, _ = s.get(t, "/metrics", false)
	assert.Equal(t, http.StatusUnauthorized, status)
	status, before := s.get(t, "/metrics", true)
	require.Equal(t, http.StatusOK, status)

	// Without the token the MCP client cannot even connect.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL + "/mcp", MaxRetries: -1}, nil)
	require.Error(t, err)

	var mu sync.Mutex
	var progress []string
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Message)
			mu.Unlock()
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   s.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{s.Token, http.DefaultTransport}},
	}, nil)
	require.NoError(t, err)
	defer cs.Close()
	exerciseMCP(t, cs, s.Data)

	// Progress notifications travel on the call's response stream.
	params := &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{
		"code": "import time\nprint('tick', flush=True)\ntime.sleep(1)\nprint('tock')",
	}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(ctx, params)
	require.NoError(t, err)
	require.False(t, res.IsError, textOf(res))
	mu.Lock()
	assert.Contains(t, strings.Join(progress, ""), "tick\n")
	mu.Unlock()

	status, after := s.get(t, "/metrics", true)
	require.Equal(t, http.StatusOK, status)
	for _, series := range []string{
		`kernelbox_executions_total{status="ok"}`,
		`kernelbox_executions_total{status="denied"}`,
		`kernelbox_kernel_starts_total`,
		`kernelbox_artifacts_total`,
		`kernelbox_artifact_bytes_total`,
		`kernelbox_permission_decisions_total{capability="filesystem.read",effect="deny"}`,
		`kernelbox_permission_decisions_total{capability="python.exec.stateful",effect="allow"}`,
		`kernelbox_execution_duration_seconds_count{status="ok"}`,
	} {
		assert.Greater(t, metric(after, series), metric(before, series), "%s moved", series)
	}
	assert.Equal(t, 1.0, metric(after, `kernelbox_sessions{state="idle"}`), "one idle session")
}

// exerciseMCP runs the conversation both transports must support: list the tools,
// keep state across calls, refuse a denied input as a tool error, return a plot.
func exerciseMCP(t *testing.T, cs *mcp.ClientSession, data string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	call := func(args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: args})
		require.NoError(t, err)
		return res
	}

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	assert.Subset(t, names, []string{"execute_code", "list_sessions", "reset_session", "list_artifacts", "read_artifact"})

	res := call(map[string]any{"code": "x = 41"})
	require.False(t, res.IsError, textOf(res))
	res = call(map[string]any{"code": "x + 1"})
	require.False(t, res.IsError, textOf(res))
	assert.Contains(t, textOf(res), "result:\n42")
	st, ok := res.StructuredContent.(map[string]any)
	require.True(t, ok)
	assert.Equal(t, "42", st["result"])

	key := filepath.Join(data, ".ssh", "id_rsa")
	require.NoError(t, os.MkdirAll(filepath.Dir(key), 0o700))
	require.NoError(t, os.WriteFile(key, []byte("not really a key"), 0o600))
	res = call(map[string]any{"code": "print(open('inputs/id_rsa').read())", "inputs": []string{key}})
	require.True(t, res.IsError, "a denial is a tool error")
	assert.Contains(t, textOf(res), "denied by rule")
	assert.Contains(t, textOf(res), "SSH keys")
	assert.NotContains(t, textOf(res), "not really a key")

	res = call(map[string]any{"code": "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()"})
	require.False(t, res.IsError, textOf(res))
	var image bool
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.ImageContent:
			image = c.MIMEType == "image/png" && strings.HasPrefix(string(c.Data), "\x89PNG")
		case *mcp.ResourceLink:
			image = image || strings.HasSuffix(c.URI, ".png")
		}
	}
	assert.True(t, image, "the plot comes back as an image or a link: %s", textOf(res))
}

func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}
