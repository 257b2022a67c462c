package docker

// A minimal Jupyter client for the integration tests: REST over the placement's unix
// socket and one execute over the kernel's websocket (legacy JSON protocol). The
// jupyter package's client is what kernelbox uses; this one only has to be obvious.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/kernelbox/kernelbox/executor"
)

// restCall sends one REST request to the placement's server and decodes the JSON
// answer into out (when non-nil). It returns the HTTP status.
func restCall(t testing.TB, srv executor.Server, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, srv.Endpoint.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+srv.Endpoint.Token)
	hc := &http.Client{Transport: &http.Transport{DialContext: serverDialer(srv), DisableKeepAlives: true}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, data, err)
		}
	}
	return resp.StatusCode
}

// startKernel starts a kernel at the placement's KernelPath and returns its id.
func startKernel(t testing.TB, srv executor.Server) string {
	t.Helper()
	var k struct{ ID string }
	code := restCall(t, srv, http.MethodPost, "/api/kernels",
		map[string]string{"name": "python3", "path": srv.KernelPath}, &k)
	if code != http.StatusCreated || k.ID == "" {
		t.Fatalf("POST /api/kernels: status %d, id %q", code, k.ID)
	}
	return k.ID
}

// kernel is one websocket connection to a kernel.
type kernel struct {
	t       testing.TB
	ws      *websocket.Conn
	session string
}

// dialKernel opens the kernel's channels websocket over the placement's socket.
// serverDialer dials srv's server the way the jupyter client does: through its
// Dial (the relay) or its socket.
func serverDialer(srv executor.Server) func(ctx context.Context, _, _ string) (net.Conn, error) {
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		if srv.Endpoint.Dial != nil {
			return srv.Endpoint.Dial(ctx)
		}
		var nd net.Dialer
		return nd.DialContext(ctx, "unix", srv.Endpoint.Socket)
	}
}

func dialKernel(t testing.TB, srv executor.Server, id string) *kernel {
	t.Helper()
	d := websocket.Dialer{
		NetDialContext:   serverDialer(srv),
		HandshakeTimeout: 60 * time.Second, // a loaded host restarting an OOM-killed kernel is slow
	}
	session := uuid.NewString()
	u := strings.Replace(srv.Endpoint.URL, "http", "ws", 1) + "/api/kernels/" + id + "/channels?session_id=" + session
	h := http.Header{"Authorization": {"token " + srv.Endpoint.Token}}
	ws, resp, err := d.Dial(u, h)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		t.Fatalf("dial kernel websocket: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	return &kernel{t: t, ws: ws, session: session}
}

// result is what one execution produced.
type result struct {
	Stdout, Stderr string
	Result         string // text/plain of execute_result
	Error          string // "ename: evalue"
	Status         string // execute_reply status
	Died           bool   // the kernel died (status restarting/dead) before the reply
}

// message is a Jupyter message in the legacy websocket JSON shape.
type message struct {
	Channel      string         `json:"channel"`
	Header       map[string]any `json:"header"`
	ParentHeader map[string]any `json:"parent_header"`
	Metadata     map[string]any `json:"metadata"`
	Content      map[string]any `json:"content"`
}

// execute runs code and gathers its output until the reply and the idle status have
// both arrived, the kernel dies, or timeout passes.
func (k *kernel) execute(code string, timeout time.Duration) result {
	k.t.Helper()
	msgID := uuid.NewString()
	req := message{
		Channel: "shell",
		Header: map[string]any{
			"msg_id": msgID, "msg_type": "execute_request", "session": k.session,
			"username": "test", "version": "5.3", "date": time.Now().UTC().Format(time.RFC3339Nano),
		},
		ParentHeader: map[string]any{},
		Metadata:     map[string]any{},
		Content: map[string]any{
			"code": code, "silent": false, "store_history": true, "user_expressions": map[string]any{},
			"allow_stdin": false, "stop_on_error": true,
		},
	}
	if err := k.ws.WriteJSON(req); err != nil {
		k.t.Fatalf("send execute_request: %v", err)
	}
	deadline := time.Now().Add(timeout)
	var (
		r              result
		replied, idle  bool
		stdout, stderr strings.Builder
	)
	for !(replied && idle) {
		_ = k.ws.SetReadDeadline(deadline)
		typ, data, err := k.ws.ReadMessage()
		if err != nil {
			k.t.Fatalf("execute %q: read: %v (stdout so far %q)", code, err, stdout.String())
		}
		if typ != websocket.TextMessage {
			continue
		}
		var m message
		if err := json.Unmarshal(data, &m); err != nil {
			k.t.Fatalf("decode message: %v", err)
		}
		msgType, _ := m.Header["msg_type"].(string)
		parent, _ := m.ParentHeader["msg_id"].(string)
		if msgType == "status" && parent == "" {
			if s, _ := m.Content["execution_state"].(string); s == "restarting" || s == "dead" {
				r.Died = true
				break
			}
		}
		if parent != msgID {
			continue
		}
		switch msgType {
		case "stream":
			text, _ := m.Content["text"].(string)
			if m.Content["name"] == "stderr" {
				stderr.WriteString(text)
			} else {
				stdout.WriteString(text)
			}
		case "execute_result":
			if d, ok := m.Content["data"].(map[string]any); ok {
				r.Result, _ = d["text/plain"].(string)
			}
		case "error":
			r.Error = fmt.Sprintf("%v: %v", m.Content["ename"], m.Content["evalue"])
		case "execute_reply":
			r.Status, _ = m.Content["status"].(string)
			replied = true
		case "status":
			idle = m.Content["execution_state"] == "idle"
		}
	}
	r.Stdout, r.Stderr = stdout.String(), stderr.String()
	return r
}

// run executes code, fails the test on a Python error, and returns its stdout.
func (k *kernel) run(code string) string {
	k.t.Helper()
	r := k.execute(code, 60*time.Second)
	if r.Died || r.Error != "" || r.Status != "ok" {
		k.t.Fatalf("execute %q: status %q, error %q, died %v, stderr %q", code, r.Status, r.Error, r.Died, r.Stderr)
	}
	return r.Stdout
}
