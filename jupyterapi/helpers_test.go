package jupyterapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
	"github.com/kernelbox/kernelbox/jupyterapi"
)

const token = "tok-gw"

// gw is a local-backend executor served with the gateway API behind
// httpapi's guard, as serve mounts it.
type gw struct {
	t   *testing.T
	srv *httptest.Server
	e   *executor.Executor
	g   *jupyterapi.Gateway
}

func newGW(t *testing.T, o jupyterapi.Options, mod func(*executor.Options)) *gw {
	t.Helper()
	te := testexec.Local(t, mod)
	g := jupyterapi.New(te.Exec, o)
	srv := httptest.NewServer(httpapi.New(te.Exec, httpapi.Options{
		Token: token, Hosts: httpapi.Hosts{Loopback: true}, Workspace: te.WS, Gateway: g,
	}))
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := g.Close(ctx); err != nil {
			t.Errorf("close gateway: %v", err)
		}
	})
	return &gw{t: t, srv: srv, e: te.Exec, g: g}
}

// do sends a request with Jupyter's token header and returns status and body.
func (s *gw) do(method, path, body string) (int, []byte) {
	s.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.srv.URL+path, r)
	require.NoError(s.t, err)
	req.Header.Set("Authorization", "token "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// start starts a kernel of template name and returns its id.
func (s *gw) start(name string) string {
	s.t.Helper()
	st, b := s.do("POST", "/api/kernels", `{"name":"`+name+`","env":{"KERNEL_LAUNCH_TIMEOUT":"40"}}`)
	require.Equal(s.t, http.StatusCreated, st, string(b))
	var k jupyterapi.Kernel
	require.NoError(s.t, json.Unmarshal(b, &k))
	return k.ID
}

// dial opens a kernel's channels with header h (nil: the token).
func (s *gw) dial(id string, h http.Header) (*wsClient, *http.Response, error) {
	return s.dialProtocols(id, h, nil)
}

// dialProtocols is dial offering the subprotocols protos; the client speaks
// the one the server chose.
func (s *gw) dialProtocols(id string, h http.Header, protos []string) (*wsClient, *http.Response, error) {
	if h == nil {
		h = http.Header{"Authorization": {"token " + token}}
	}
	url := "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/api/kernels/" + id + "/channels?session_id=" + uuid.NewString()
	d := *websocket.DefaultDialer
	d.Subprotocols = protos
	c, resp, err := d.Dial(url, h)
	if err != nil {
		return nil, resp, err
	}
	s.t.Cleanup(func() { c.Close() })
	return &wsClient{t: s.t, c: c, v1: c.Subprotocol() == v1Protocol}, resp, nil
}

func (s *gw) mustDial(id string) *wsClient {
	s.t.Helper()
	c, _, err := s.dial(id, nil)
	require.NoError(s.t, err)
	return c
}

// wsClient is a test's end of a kernel WebSocket.
type wsClient struct {
	t  *testing.T
	c  *websocket.Conn
	v1 bool // speaks the binary v1 subprotocol (v1_test.go)
}

// msg is a message as a client reads it.
type msg struct {
	Channel      string          `json:"channel"`
	Header       map[string]any  `json:"header"`
	ParentHeader map[string]any  `json:"parent_header"`
	Content      json.RawMessage `json:"content"`
	MsgType      string          `json:"msg_type"`
	MsgID        string          `json:"msg_id"`
}

func (m msg) parent() string { id, _ := m.ParentHeader["msg_id"].(string); return id }

func (m msg) text(field string) string {
	var c map[string]any
	_ = json.Unmarshal(m.Content, &c)
	s, _ := c[field].(string)
	return s
}

// send sends a request and returns its msg_id.
func (w *wsClient) send(channel, msgType string, content any) string {
	w.t.Helper()
	id := uuid.NewString()
	header := map[string]any{"msg_id": id, "msg_type": msgType, "session": "s", "username": "u", "version": "5.3"}
	if w.v1 {
		require.NoError(w.t, w.c.WriteMessage(websocket.BinaryMessage, v1Frame(w.t, channel, header, map[string]any{}, map[string]any{}, content)))
		return id
	}
	require.NoError(w.t, w.c.WriteJSON(map[string]any{
		"channel": channel, "header": header,
		"parent_header": map[string]any{}, "metadata": map[string]any{}, "content": content, "buffers": []any{},
	}))
	return id
}

func (w *wsClient) execute(code string) string {
	return w.send("shell", "execute_request", map[string]any{"code": code, "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": false})
}

// read reads one message within d.
func (w *wsClient) read(d time.Duration) (msg, error) {
	_ = w.c.SetReadDeadline(time.Now().Add(d))
	var m msg
	typ, b, err := w.c.ReadMessage()
	if err != nil {
		return m, err
	}
	if w.v1 {
		require.Equal(w.t, websocket.BinaryMessage, typ, "a v1 connection's frames are binary")
		return readV1(w.t, b), nil
	}
	require.Equal(w.t, websocket.TextMessage, typ, "a JSON connection's frames are text")
	require.NoError(w.t, json.Unmarshal(b, &m), string(b))
	require.Equal(w.t, m.Header["msg_id"], m.MsgID, "msg_id repeated at the top")
	return m, nil
}

// until reads the messages answering id until its reply of type replyType and
// its idle status have come (idle only for execute), returning them all.
func (w *wsClient) until(id, replyType string) (reply msg, iopub []msg) {
	w.t.Helper()
	idle := replyType != "execute_reply"
	deadline := time.Now().Add(2 * time.Minute)
	for reply.MsgType == "" || !idle {
		m, err := w.read(time.Until(deadline))
		require.NoError(w.t, err, "waiting for %s", replyType)
		if m.parent() != id {
			continue
		}
		switch {
		case m.MsgType == replyType:
			reply = m
		case m.MsgType == "status" && m.text("execution_state") == "idle":
			idle = true
		case m.Channel == "iopub" && m.MsgType != "status":
			iopub = append(iopub, m)
		}
	}
	return reply, iopub
}

// stdout joins the stream text of msgs.
func stdout(msgs []msg) string {
	var b bytes.Buffer
	for _, m := range msgs {
		if m.MsgType == "stream" {
			b.WriteString(m.text("text"))
		}
	}
	return b.String()
}

// closeCode reads until the connection ends and returns its close code and
// reason, or -1 and the error when it ended without a close frame.
func (w *wsClient) closeCode(d time.Duration) (int, string) {
	w.t.Helper()
	deadline := time.Now().Add(d)
	for {
		_ = w.c.SetReadDeadline(deadline)
		_, _, err := w.c.ReadMessage()
		if err == nil {
			continue
		}
		if ce, ok := err.(*websocket.CloseError); ok {
			return ce.Code, ce.Text
		}
		return -1, err.Error() // ended without a close frame
	}
}
