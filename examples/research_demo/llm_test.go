package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/permissions"
)

// fakeTool answers sandbox_execute calls without a kernel: calls with inputs are
// denied, the others succeed and produce the requested artifacts.
type fakeTool struct {
	mu    sync.Mutex
	calls []toolArgs
}

func (f *fakeTool) execute(_ context.Context, args toolArgs) (*api.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, args)
	f.mu.Unlock()
	if len(args.Inputs) > 0 {
		denied := &permissions.DeniedError{Decisions: []permissions.Decision{{
			Capability: permissions.ResolvedCapability{Name: permissions.FilesystemRead, Target: "/p/.ssh/id_rsa"},
			Effect:     permissions.Deny,
			Reason:     `denied by rule "SSH keys" (builtin)`,
		}}}
		return &api.Result{Status: api.StatusDenied}, fmt.Errorf("%w: %w", api.ErrDenied, denied)
	}
	return &api.Result{
		SessionID: args.SessionID,
		Status:    api.StatusOK,
		Stdout:    "ran: " + args.Code + "\n",
		Artifacts: []api.Artifact{{Name: plotName, Path: "/a/" + plotName}, {Name: reportName, Path: "/a/" + reportName}},
	}, nil
}

// fakeModel is an OpenAI-compatible endpoint on loopback that plays back replies and
// records the requests.
type fakeModel struct {
	t       *testing.T
	replies []string // JSON of the assistant message, in order
	mu      sync.Mutex
	reqs    []chatRequest
	auth    []string
}

func (m *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	require.Equal(m.t, "/v1/chat/completions", r.URL.Path)
	b, err := io.ReadAll(r.Body)
	require.NoError(m.t, err)
	var req chatRequest
	require.NoError(m.t, json.Unmarshal(b, &req))
	m.mu.Lock()
	n := len(m.reqs)
	m.reqs = append(m.reqs, req)
	m.auth = append(m.auth, r.Header.Get("Authorization"))
	m.mu.Unlock()
	if n >= len(m.replies) {
		http.Error(w, "no more replies", http.StatusInternalServerError)
		return
	}
	fmt.Fprintf(w, `{"choices":[{"message":%s}]}`, m.replies[n])
}

// requests returns the requests received so far and their Authorization headers.
func (m *fakeModel) requests() ([]chatRequest, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]chatRequest(nil), m.reqs...), append([]string(nil), m.auth...)
}

func TestModelAnalystLoop(t *testing.T) {
	t.Parallel()
	model := &fakeModel{t: t, replies: []string{
		`{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"sandbox_execute","arguments":"{\"code\":\"x = 41\"}"}}]}`,
		`{"role":"assistant","content":"","tool_calls":[{"id":"c2","type":"function","function":{"name":"sandbox_execute","arguments":"not json"}},` +
			`{"id":"c3","type":"function","function":{"name":"sandbox_execute","arguments":"{\"code\":\"x + 1\",\"session_id\":\"s\"}"}}]}`,
		`{"role":"assistant","content":"SqueezeNet 1.0 is the best per parameter."}`,
	}}
	srv := httptest.NewServer(model)
	defer srv.Close()

	ft := &fakeTool{}
	var out strings.Builder
	a := &modelAnalyst{
		llm:     llmConfig{baseURL: srv.URL + "/v1", model: "m", apiKey: "k", maxSteps: 5, client: srv.Client()},
		tool:    ft,
		session: "s",
		p:       &printer{w: &out},
	}
	f, err := a.analyse(context.Background(), brief(question))
	require.NoError(t, err, out.String())
	require.Equal(t, "SqueezeNet 1.0 is the best per parameter.", f.message)
	require.Equal(t, 3, f.steps, "two runs and one call with bad arguments")
	require.Contains(t, f.artifacts, plotName)

	// The policy probe ran first and was denied; then the model's two good calls,
	// the first in the analyst's session by default.
	require.Len(t, ft.calls, 3)
	require.Equal(t, []string{".ssh/id_rsa"}, ft.calls[0].Inputs)
	require.Equal(t, toolArgs{Code: "x = 41", SessionID: "s"}, ft.calls[1])
	require.Equal(t, "x + 1", ft.calls[2].Code)
	require.Contains(t, out.String(), "[policy check] data_analyst: try to stage")
	require.Contains(t, out.String(), `denied by rule "SSH keys" (builtin)`)

	// What the model saw: the tool declared, the key sent, each call's result.
	reqs, auth := model.requests()
	require.Len(t, reqs, 3)
	require.Equal(t, "Bearer k", auth[0])
	require.Equal(t, "m", reqs[0].Model)
	require.Equal(t, toolName, reqs[0].Tools[0].Function.Name)
	last := reqs[2].Messages
	require.Equal(t, "tool", last[len(last)-1].Role)
	require.Equal(t, "c3", last[len(last)-1].ToolCallID)
	require.Contains(t, last[len(last)-1].Content, `"status":"ok"`)
	require.Contains(t, last[len(last)-2].Content, "arguments are not valid JSON")
}

func TestModelAnalystStepLimit(t *testing.T) {
	t.Parallel()
	again := `{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"sandbox_execute","arguments":"{\"code\":\"1\"}"}}]}`
	model := &fakeModel{t: t, replies: []string{again, again, again}}
	srv := httptest.NewServer(model)
	defer srv.Close()
	ft := &fakeTool{}
	a := &modelAnalyst{
		llm:  llmConfig{baseURL: srv.URL + "/v1", model: "m", maxSteps: 2, client: srv.Client()},
		tool: ft, session: "s", p: &printer{w: io.Discard},
	}
	f, err := a.analyse(context.Background(), "brief")
	require.NoError(t, err)
	require.Equal(t, 2, f.steps)
	require.Contains(t, f.message, "without a final answer")
	require.Len(t, ft.calls, 3, "the probe and two model calls")
	_, auth := model.requests()
	require.Empty(t, auth[0], "no key, no Authorization header")
}

func TestForModelDenied(t *testing.T) {
	t.Parallel()
	o, err := call(context.Background(), &fakeTool{}, toolArgs{Code: "1", SessionID: "s", Inputs: []string{"k"}})
	require.NoError(t, err, "a denial is an outcome, not a failure")
	require.Equal(t, "denied", o.status())
	var m struct {
		Status string   `json:"status"`
		Denied []string `json:"denied"`
	}
	require.NoError(t, json.Unmarshal([]byte(o.forModel()), &m))
	require.Equal(t, "denied", m.Status)
	require.Equal(t, []string{`deny filesystem.read on /p/.ssh/id_rsa: denied by rule "SSH keys" (builtin)`}, m.Denied)
}
