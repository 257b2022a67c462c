package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The scoped-token subtests of the other interfaces: the dashboard, MCP, the
// Jupyter gateway and the CLI (TestScopedTokens runs them).

// scopedDashboard: logged in with a scoped token, the dashboard lists that
// token's sessions only and names the token.
func scopedDashboard(t *testing.T, s *tokenServe) {
	b := newBrowser(t)
	_, tok := s.mint(t, `{"name":"viewer","sessions":["d-*"]}`)
	for _, id := range []string{"d-1", "x-other"} {
		code, _, out := s.call(t, s.Token, "POST", "/v1/sessions", `{"id":"`+id+`"}`)
		require.Equal(t, 201, code, out)
	}
	b.do(chromedp.Navigate(s.URL + "/#token=" + tok))
	b.waitFor("the dashboard", `!document.getElementById("main").hidden`, 30*time.Second)
	b.waitFor("its session's row", `document.querySelector('tr[data-session="d-1"]')`, 30*time.Second)
	b.waitFor("the token's name", `document.getElementById("who").textContent.includes("viewer")`, 10*time.Second)
	assert.False(t, eval[bool](b, `!!document.querySelector('tr[data-session="x-other"]')`), "another session in a scoped token's dashboard")
	assert.False(t, eval[bool](b, `document.getElementById("who").hidden`))
	b.checkClean()
}

// mcpAs connects an MCP client to /mcp with token.
func (s *tokenServe) mcpAs(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: s.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// scopedMCP: over MCP, a scoped token's tools see and touch only its sessions.
func scopedMCP(t *testing.T, s *tokenServe) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, tok1 := s.mint(t, `{"name":"mcp-1","sessions":["m-*"]}`)
	_, tok2 := s.mint(t, `{"name":"mcp-2","sessions":["*"]}`)
	c1, c2 := s.mcpAs(t, tok1), s.mcpAs(t, tok2)
	tool := func(cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		require.NoError(t, err, name)
		return res
	}
	res := tool(c1, "execute_code", map[string]any{"session_id": "m-1", "code": "import os; os.makedirs('outputs', exist_ok=True); open('outputs/r.txt','w').write('mine'); secret = 7"})
	require.False(t, res.IsError, textOf(res))
	res = tool(c1, "start_code", map[string]any{"session_id": "m-1", "code": "1"})
	require.False(t, res.IsError, textOf(res))
	var started struct {
		CallID string `json:"call_id"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	require.NoError(t, json.Unmarshal(b, &started))
	require.NotEmpty(t, started.CallID)

	res = tool(c2, "list_sessions", nil)
	assert.NotContains(t, textOf(res), "m-1")
	res = tool(c1, "list_sessions", nil)
	assert.Contains(t, textOf(res), "m-1")
	for _, a := range []struct {
		name string
		args map[string]any
	}{
		{"execute_code", map[string]any{"session_id": "m-1", "code": "print(secret)"}},
		{"start_code", map[string]any{"session_id": "m-1", "code": "print(secret)"}},
		{"reset_session", map[string]any{"session_id": "m-1"}},
		{"fork_session", map[string]any{"session_id": "m-1", "new_session_id": "stolen"}},
		{"list_files", map[string]any{"session_id": "m-1"}},
		{"read_file", map[string]any{"session_id": "m-1", "path": "outputs/r.txt"}},
		{"write_file", map[string]any{"session_id": "m-1", "path": "evil.py", "content": "x"}},
		{"list_artifacts", map[string]any{"session_id": "m-1"}},
		{"read_artifact", map[string]any{"session_id": "m-1", "name": "r.txt"}},
		{"get_call", map[string]any{"call_id": started.CallID}},
	} {
		res := tool(c2, a.name, a.args)
		assert.True(t, res.IsError, "mcp-2 %s: %s", a.name, textOf(res))
		assert.Contains(t, textOf(res), "not found", a.name)
		assert.NotContains(t, textOf(res), "mine", a.name)
	}
	_, err := c2.ReadResource(ctx, &mcp.ReadResourceParams{URI: "kernelbox://artifacts/m-1/r.txt"})
	assert.Error(t, err, "another token's artifact as a resource")
	res = tool(c1, "execute_code", map[string]any{"session_id": "m-1", "code": "print(secret)"})
	assert.Contains(t, textOf(res), "7", "mcp-1's session is untouched")
	found := false
	for _, l := range s.auditLines(t) {
		if l["interface"] == "mcp" && l["token_name"] == "mcp-2" && l["outcome"] == "refused" {
			found = true
		}
	}
	assert.True(t, found, "mcp-2's refusals in the audit log")
}

// scopedGateway: the Jupyter gateway lists a scoped token's sessions only,
// refuses another's channels as missing, and ends a revoked token's
// WebSocket with the reason.
func scopedGateway(t *testing.T, s *tokenServe) {
	id1, tok1 := s.mint(t, `{"name":"jup-1","sessions":["g-*"]}`)
	_, tok2 := s.mint(t, `{"name":"jup-2","sessions":["*"]}`)
	code, _, out := s.call(t, tok1, "POST", "/v1/sessions/g-1/execute", `{"code":"1"}`)
	require.Equal(t, 200, code, out)
	code, _, out = s.call(t, tok2, "GET", "/api/kernels", "")
	require.Equal(t, 200, code)
	assert.NotContains(t, out, "g-1")
	code, _, out = s.call(t, tok1, "GET", "/api/kernels", "")
	require.Equal(t, 200, code)
	assert.Contains(t, out, "g-1")

	wsURL := "ws" + strings.TrimPrefix(s.URL, "http") + "/api/kernels/g-1/channels"
	dial := func(token string) (*websocket.Conn, *http.Response, error) {
		return websocket.DefaultDialer.Dial(wsURL, http.Header{"Authorization": {"token " + token}})
	}
	_, resp, err := dial(tok2)
	require.Error(t, err)
	require.NotNil(t, resp)
	assert.Equal(t, 404, resp.StatusCode, "another token's kernel channels")
	ws, _, err := dial(tok1)
	require.NoError(t, err)
	defer ws.Close()
	code, _, out = s.call(t, s.Token, "DELETE", "/v1/tokens/"+id1, "")
	require.Equal(t, 204, code, out)
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		_, _, err = ws.ReadMessage()
		if err != nil {
			break
		}
	}
	var ce *websocket.CloseError
	require.ErrorAs(t, err, &ce, "the WebSocket is closed with a reason")
	assert.Equal(t, websocket.ClosePolicyViolation, ce.Code)
	assert.Contains(t, ce.Text, "revoked")
}

// scopedCLI: kernelbox token create|list|revoke and kernelbox audit.
func scopedCLI(t *testing.T, s *tokenServe) {
	run := func(args ...string) (string, error) {
		var out, errb strings.Builder
		err := dispatch(context.Background(), args, &out, &errb)
		return out.String(), err
	}
	flags := []string{"--server", s.URL, "--token", s.Token}
	secret, err := run(append([]string{"token", "create"}, append(flags, "--name", "cli-agent", "--sessions", "cli-*,x1", "--ops", "execute,files", "--max-sessions", "1", "--ttl", "1h")...)...)
	require.NoError(t, err)
	secret = strings.TrimSpace(secret)
	require.Len(t, secret, 64)
	out, err := run(append([]string{"exec"}, "--server", s.URL, "--token", secret, "--session", "cli-1", "-c", "print(6*7)")...)
	require.NoError(t, err, out)
	assert.Contains(t, out, "42")
	out, err = run(append([]string{"token", "list"}, flags...)...)
	require.NoError(t, err)
	assert.Contains(t, out, "cli-agent")
	assert.Contains(t, out, "cli-*,x1")
	assert.NotContains(t, out, secret)
	id := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "cli-agent") {
			id = strings.Fields(line)[0]
		}
	}
	require.NotEmpty(t, id)
	_, err = run(append([]string{"token", "revoke"}, append(flags, id)...)...)
	require.NoError(t, err)
	_, err = run(append([]string{"token", "revoke"}, append(flags, id)...)...)
	require.Error(t, err, "revoked twice")
	_, err = run(append([]string{"exec"}, "--server", s.URL, "--token", secret, "--session", "cli-1", "-c", "1")...)
	require.Error(t, err, "a revoked token")
	_, err = run(append([]string{"token", "create"}, "--server", s.URL, "--token", "wrong", "--name", "n", "--sessions", "*")...)
	require.Error(t, err)

	out, err = run("audit", "--file", s.audit, "--token", "cli-agent")
	require.NoError(t, err)
	assert.Contains(t, out, `"POST /v1/sessions/{id}/execute"`)
	assert.NotContains(t, out, secret)
	out, err = run("audit", "--file", s.audit, "--refused", "--table")
	require.NoError(t, err)
	assert.Contains(t, out, "OUTCOME")
	assert.Contains(t, out, "refused")
}
