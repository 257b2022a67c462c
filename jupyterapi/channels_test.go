package jupyterapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/jupyterapi"
)

// TestChannelsGuard: the WebSocket upgrade passes the same guard as every
// route: no token, a foreign Host (DNS rebinding) and a foreign Origin are
// refused before anything is upgraded; Jupyter's and kernelbox's token forms
// and a same-origin page are admitted.
func TestChannelsGuard(t *testing.T) {
	s := newGW(t, jupyterapi.Options{}, nil)
	id := s.start("default")
	host := strings.TrimPrefix(s.srv.URL, "http://")
	for _, tc := range []struct {
		name string
		h    http.Header
		want int
	}{
		{"no token", http.Header{}, http.StatusUnauthorized},
		{"wrong token", http.Header{"Authorization": {"token nope"}}, http.StatusUnauthorized},
		{"foreign Host", http.Header{"Authorization": {"token " + token}, "Host": {"evil.example:80"}}, http.StatusForbidden},
		{"rebinding: foreign Host and its Origin", http.Header{"Authorization": {"token " + token}, "Host": {"evil.example"}, "Origin": {"http://evil.example"}}, http.StatusForbidden},
		{"foreign Origin", http.Header{"Authorization": {"token " + token}, "Origin": {"http://evil.example"}}, http.StatusForbidden},
		{"null Origin", http.Header{"Authorization": {"token " + token}, "Origin": {"null"}}, http.StatusForbidden},
		{"cross-site fetch", http.Header{"Authorization": {"token " + token}, "Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden},
		{"Jupyter token", http.Header{"Authorization": {"token " + token}}, http.StatusSwitchingProtocols},
		{"Bearer token", http.Header{"Authorization": {"Bearer " + token}}, http.StatusSwitchingProtocols},
		{"same Origin", http.Header{"Authorization": {"token " + token}, "Origin": {"http://" + host}}, http.StatusSwitchingProtocols},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The dialer sends a "Host" of the header as the request's Host,
			// as a rebinding page's browser does.
			c, resp, err := s.dial(id, tc.h)
			if tc.want == http.StatusSwitchingProtocols {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Nil(t, c)
			require.NotNil(t, resp)
			assert.Equal(t, tc.want, resp.StatusCode)
		})
	}
}

// TestChannelsExecute runs cells through a kernel's WebSocket: state kept
// across cells, the iopub messages Jupyter sends (to every client of the
// kernel), the execute_reply to the requester only, an error cell, kernel
// requests passed through with their replies routed to the right client, and
// a client that borrows another's header getting only its own answers.
func TestChannelsExecute(t *testing.T) {
	s := newGW(t, jupyterapi.Options{}, nil)
	id := s.start("default")
	a, b := s.mustDial(id), s.mustDial(id)

	x := a.execute("x = 40")
	rep, _ := a.until(x, "execute_reply")
	assert.Equal(t, "ok", rep.text("status"))
	assert.Equal(t, x, rep.parent(), "the reply's parent is the client's request")

	x = a.execute("print(x + 2)\nx + 1")
	rep, io := a.until(x, "execute_reply")
	assert.Equal(t, "ok", rep.text("status"))
	assert.Equal(t, "42\n", stdout(io))
	types := []string{}
	for _, m := range io {
		types = append(types, m.MsgType)
	}
	assert.Equal(t, []string{"execute_input", "stream", "execute_result"}, types)
	assert.Contains(t, string(io[2].Content), `"41"`)

	// b saw the iopub of a's cell (busy, outputs, idle), and no execute_reply.
	var seen []string
	for {
		m, err := b.read(2 * time.Second)
		if err != nil {
			break
		}
		if m.parent() == x {
			seen = append(seen, m.MsgType)
		}
		if m.parent() == x && m.MsgType == "status" && m.text("execution_state") == "idle" {
			break
		}
	}
	assert.Contains(t, seen, "stream")
	assert.NotContains(t, seen, "execute_reply", "a reply goes to its requester only")

	x = a.execute("1/0")
	rep, io = a.until(x, "execute_reply")
	assert.Equal(t, "error", rep.text("status"))
	assert.Equal(t, "ZeroDivisionError", rep.text("ename"))
	require.NotEmpty(t, io)
	assert.Equal(t, "error", io[len(io)-1].MsgType)

	k := b.send("shell", "kernel_info_request", map[string]any{})
	rep, _ = b.until(k, "kernel_info_reply")
	assert.Contains(t, string(rep.Content), `"language_info"`)
	k = b.send("shell", "complete_request", map[string]any{"code": "impo", "cursor_pos": 4})
	rep, _ = b.until(k, "complete_reply")
	assert.Contains(t, string(rep.Content), `"import"`)
	k = b.send("shell", "debug_request", map[string]any{})
	rep, _ = b.until(k, "debug_reply")
	assert.Equal(t, "error", rep.text("status"))

	// b sends an execute_request whose parent header (and msg_id) are a's:
	// it is b's request all the same, answered to b with b's header.
	require.NoError(t, b.c.WriteJSON(map[string]any{
		"channel": "shell", "header": map[string]any{"msg_id": x, "msg_type": "execute_request"},
		"parent_header": map[string]any{"msg_id": x, "msg_type": "execute_request"},
		"metadata":      map[string]any{}, "content": map[string]any{"code": "print('from b')"},
	}))
	rep, io = b.until(x, "execute_reply")
	assert.Equal(t, "ok", rep.text("status"))
	assert.Equal(t, "from b\n", stdout(io))
	for {
		m, err := a.read(time.Second)
		if err != nil {
			break
		}
		assert.NotEqual(t, "execute_reply", m.MsgType, "a got a reply to b's request")
	}

	// An input_reply is dropped (no kernel waits for one); the socket lives on.
	b.send("stdin", "input_reply", map[string]any{"value": "x"})
	x = b.execute("input('?')")
	rep, _ = b.until(x, "execute_reply")
	assert.Equal(t, "error", rep.text("status"), "input() fails at once: allow_stdin is false")
	assert.Equal(t, 2, connections(t, s, id))
}

func connections(t *testing.T, s *gw, id string) int {
	t.Helper()
	st, b := s.do("GET", "/api/kernels/"+id, "")
	require.Equal(t, http.StatusOK, st)
	var k jupyterapi.Kernel
	require.NoError(t, json.Unmarshal(b, &k))
	return k.Connections
}

// attached waits until the server has attached the client that just dialled
// kernel id: a dial returns once the handshake is done, before the server's handler
// attaches the socket to its kernel, and a kernel deleted in between refuses the
// client as a session that is gone (1001) rather than one shut down under it.
func attached(t *testing.T, s *gw, id string) {
	t.Helper()
	require.Eventually(t, func() bool { return connections(t, s, id) == 1 }, 30*time.Second, 10*time.Millisecond,
		"the client of kernel %s was never attached", id)
}

// TestKernelClosedUnderClient: a kernel shut down (DELETE /api/kernels) while
// a client is connected closes the client's socket with a reason; so does a
// session closed through /v1 under a client (at once, through the session's
// watch), and its id is then not found: no new session of that id is made.
func TestKernelClosedUnderClient(t *testing.T) {
	s := newGW(t, jupyterapi.Options{}, nil)
	id := s.start("default")
	c := s.mustDial(id)
	attached(t, s, id)
	st, _ := s.do("DELETE", "/api/kernels/"+id, "")
	require.Equal(t, http.StatusNoContent, st)
	code, reason := c.closeCode(30 * time.Second)
	assert.Equal(t, 1000, code)
	assert.Contains(t, reason, "shut down")

	id = s.start("default")
	c = s.mustDial(id)
	attached(t, s, id)
	st, _ = s.do("DELETE", "/v1/sessions/"+id, "")
	require.Equal(t, http.StatusNoContent, st)
	code, reason = c.closeCode(30 * time.Second)
	assert.Equal(t, 1000, code, "told at once, not at its next request")
	assert.Contains(t, reason, "session was closed")
	_, err := s.e.Session(id)
	assert.Error(t, err, "the session is closed")
	c2, resp, err := s.dial(id, nil)
	assert.Nil(t, c2)
	require.Error(t, err)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "a closed session's kernel id is not found")
	_, err = s.e.Session(id)
	assert.Error(t, err, "no session was made again")
}
