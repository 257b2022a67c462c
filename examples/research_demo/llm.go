package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// llmConfig reaches an OpenAI-compatible chat completions endpoint (OpenAI, vLLM,
// llama.cpp's server, Ollama's /v1, ...).
type llmConfig struct {
	baseURL  string // e.g. http://localhost:11434/v1; /chat/completions is appended
	model    string
	apiKey   string // sent as a bearer token when set
	maxSteps int    // tool calls allowed before the analyst must stop
	client   *http.Client
}

// llmFromEnv reads KERNELBOX_LLM_BASE_URL, KERNELBOX_LLM_MODEL and
// KERNELBOX_LLM_API_KEY. ok is false unless the first two are set.
func llmFromEnv() (c llmConfig, ok bool) {
	c = llmConfig{
		baseURL: strings.TrimRight(os.Getenv("KERNELBOX_LLM_BASE_URL"), "/"),
		model:   os.Getenv("KERNELBOX_LLM_MODEL"),
		apiKey:  os.Getenv("KERNELBOX_LLM_API_KEY"),
		client:  &http.Client{Timeout: 5 * time.Minute},
	}
	return c, c.baseURL != "" && c.model != ""
}

// The wire format of chat completions, reduced to what the loop uses.
type (
	chatMessage struct {
		Role       string     `json:"role"`
		Content    string     `json:"content"`
		ToolCalls  []toolCall `json:"tool_calls,omitempty"`
		ToolCallID string     `json:"tool_call_id,omitempty"`
	}
	toolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"` // JSON text
		} `json:"function"`
	}
	chatTool struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	chatRequest struct {
		Model    string        `json:"model"`
		Messages []chatMessage `json:"messages"`
		Tools    []chatTool    `json:"tools"`
	}
	chatResponse struct {
		Choices []struct {
			Message chatMessage `json:"message"`
		} `json:"choices"`
	}
)

// chat sends one chat completion request and returns the model's message.
func (c llmConfig) chat(ctx context.Context, msgs []chatMessage) (chatMessage, error) {
	t := chatTool{Type: "function"}
	t.Function.Name, t.Function.Description, t.Function.Parameters = toolName, toolDescription, json.RawMessage(toolParameters)
	body, err := json.Marshal(chatRequest{Model: c.model, Messages: msgs, Tools: []chatTool{t}})
	if err != nil {
		return chatMessage{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return chatMessage{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return chatMessage{}, fmt.Errorf("chat completions: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return chatMessage{}, fmt.Errorf("chat completions: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return chatMessage{}, fmt.Errorf("chat completions: %s: %s", resp.Status, clip(string(b), 500))
	}
	var cr chatResponse
	if err := json.Unmarshal(b, &cr); err != nil {
		return chatMessage{}, fmt.Errorf("chat completions: decode reply: %w", err)
	}
	if len(cr.Choices) == 0 {
		return chatMessage{}, fmt.Errorf("chat completions: the reply has no choices")
	}
	return cr.Choices[0].Message, nil
}

// modelAnalyst is the data_analyst driven by a model: a loop that sends the
// conversation, runs the tool calls the model asks for, and returns the model's
// first message without tool calls. It makes at most llm.maxSteps tool calls.
type modelAnalyst struct {
	llm     llmConfig
	tool    tool
	session string
	p       *printer
}

func (a *modelAnalyst) analyse(ctx context.Context, brief string) (finding, error) {
	var f finding
	msgs := []chatMessage{
		{Role: "system", Content: "You are data_analyst, an agent in a research pipeline. You work only through the " +
			toolName + " tool, in session_id \"" + a.session + "\", in several small steps: read the CSV into a " +
			"pandas DataFrame once and reuse it in later calls (the kernel keeps it). Use matplotlib's Agg backend " +
			"and savefig into outputs/. When the files are written, reply without a tool call: a short answer for " +
			"the coordinator naming the best model and the trend."},
		{Role: "user", Content: brief},
	}
	// The demo shows the permission engine whoever drives the analyst.
	if err := probePolicy(ctx, a.tool, a.session, a.p); err != nil {
		return f, err
	}
	for f.steps < a.llm.maxSteps {
		msg, err := a.llm.chat(ctx, msgs)
		if err != nil {
			return f, err
		}
		msg.Role = "assistant"
		msgs = append(msgs, msg)
		if len(msg.ToolCalls) == 0 {
			f.message = strings.TrimSpace(msg.Content)
			return f, nil
		}
		for _, tc := range msg.ToolCalls {
			result, err := a.run(ctx, tc, &f)
			if err != nil {
				return f, err
			}
			msgs = append(msgs, chatMessage{Role: "tool", ToolCallID: tc.ID, Content: result})
		}
	}
	f.message = fmt.Sprintf("(the model used its %d tool calls without a final answer)", a.llm.maxSteps)
	return f, nil
}

// run performs one tool call the model asked for and returns what the model reads.
func (a *modelAnalyst) run(ctx context.Context, tc toolCall, f *finding) (string, error) {
	if f.steps >= a.llm.maxSteps {
		return `{"status":"refused","problem":"no tool calls left; answer now"}`, nil
	}
	f.steps++
	var args toolArgs
	if tc.Function.Name != toolName {
		return fmt.Sprintf(`{"status":"error","problem":"unknown tool %q; the only tool is %s"}`, tc.Function.Name, toolName), nil
	}
	if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil {
		return fmt.Sprintf(`{"status":"error","problem":%q}`, "arguments are not valid JSON: "+err.Error()), nil
	}
	if args.SessionID == "" {
		args.SessionID = a.session
	}
	a.p.stepStart(fmt.Sprintf("%d/%d", f.steps, a.llm.maxSteps), "data_analyst (model)", firstCodeLine(args.Code))
	o, err := call(ctx, a.tool, args)
	a.p.stepEnd(args, o, "")
	if err != nil {
		return "", err
	}
	if o.res != nil && o.denied == nil {
		f.addArtifacts(o.res.Artifacts)
	}
	return o.forModel(), nil
}

// firstCodeLine is a title for a model's call: its first comment or line of code.
func firstCodeLine(code string) string {
	for _, l := range strings.Split(code, "\n") {
		if l = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "#")); l != "" {
			return clipHead(l, 70)
		}
	}
	return "(empty code)"
}

func clipHead(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
