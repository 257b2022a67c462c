package jupyterapi_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/jupyterapi"
)

// v1Protocol is Jupyter Server's binary kernel WebSocket subprotocol.
const v1Protocol = "v1.kernel.websocket.jupyter.org"

// v1Raw frames parts as Jupyter Server's serialize_msg_to_ws_v1 does: the
// count of offsets, the offsets (the last is the frame's end), the parts.
func v1Raw(parts ...[]byte) []byte {
	n := len(parts) + 1
	b := binary.LittleEndian.AppendUint64(nil, uint64(n))
	off := 8 * (1 + n)
	for _, p := range parts {
		b = binary.LittleEndian.AppendUint64(b, uint64(off))
		off += len(p)
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(off))
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// v1Frame is a client's message in the v1 protocol.
func v1Frame(t testing.TB, channel string, header, parent, meta, content any) []byte {
	t.Helper()
	parts := [][]byte{[]byte(channel)}
	for _, v := range []any{header, parent, meta, content} {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		parts = append(parts, b)
	}
	return v1Raw(parts...)
}

// readV1 decodes a server's v1 frame as Jupyter Server's
// deserialize_msg_from_ws_v1 does, checking its offsets strictly.
func readV1(t testing.TB, b []byte) msg {
	t.Helper()
	require.GreaterOrEqual(t, len(b), 8)
	n := int(binary.LittleEndian.Uint64(b))
	require.Equal(t, 6, n, "a channel and 4 JSON parts, no buffers")
	require.GreaterOrEqual(t, len(b), 8*(1+n))
	offs := make([]int, n)
	for i := range offs {
		offs[i] = int(binary.LittleEndian.Uint64(b[8*(1+i):]))
	}
	require.Equal(t, 8*(1+n), offs[0])
	require.Equal(t, len(b), offs[n-1])
	part := func(i int) []byte { require.LessOrEqual(t, offs[i], offs[i+1]); return b[offs[i]:offs[i+1]] }
	m := msg{Channel: string(part(0)), Content: json.RawMessage(part(4))}
	require.NoError(t, json.Unmarshal(part(1), &m.Header), string(part(1)))
	require.NoError(t, json.Unmarshal(part(2), &m.ParentHeader), string(part(2)))
	var meta map[string]any
	require.NoError(t, json.Unmarshal(part(3), &meta), string(part(3)))
	require.True(t, json.Valid(m.Content), string(m.Content))
	m.MsgID, _ = m.Header["msg_id"].(string)
	m.MsgType, _ = m.Header["msg_type"].(string)
	return m
}

// TestChannelsV1 (2-6 s): a client offering the binary
// v1.kernel.websocket.jupyter.org subprotocol gets it (alone or among others),
// one offering none or others the legacy JSON protocol; a v1 client runs cells
// with state kept, its iopub and execute_reply in binary frames, while a JSON
// client of the same kernel gets the same iopub in text frames; kernel
// requests pass through; Stats counts the clients and messages.
func TestChannelsV1(t *testing.T) {
	t.Parallel()
	s := newGW(t, jupyterapi.Options{}, nil)
	id := s.start("default")
	for _, tc := range []struct {
		name   string
		offer  []string
		chosen string
	}{
		{"none", nil, ""},
		{"v1", []string{v1Protocol}, v1Protocol},
		{"another and v1", []string{"x.legacy.example", v1Protocol}, v1Protocol},
		{"another", []string{"x.legacy.example"}, ""},
	} {
		c, resp, err := s.dialProtocols(id, nil, tc.offer)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.chosen, resp.Header.Get("Sec-WebSocket-Protocol"), tc.name)
		assert.Equal(t, tc.chosen == v1Protocol, c.v1, tc.name)
		require.NoError(t, c.c.Close())
	}
	require.Eventually(t, func() bool { return s.g.Stats().ClientsStarted == 0 }, 10*time.Second, 10*time.Millisecond)

	a, _, err := s.dialProtocols(id, nil, []string{v1Protocol})
	require.NoError(t, err)
	b := s.mustDial(id)
	// Both attached (the upgrade's answer may reach a client first).
	require.Eventually(t, func() bool { return s.g.Stats().ClientsStarted == 2 }, 10*time.Second, 10*time.Millisecond)
	st := s.g.Stats()
	assert.Equal(t, int64(1), st.ClientsV1)
	assert.Equal(t, int64(0), st.ClientsWatching)

	x := a.execute("x = 40")
	rep, _ := a.until(x, "execute_reply")
	assert.Equal(t, "ok", rep.text("status"))
	assert.Equal(t, x, rep.parent())

	x = a.execute("print(x + 2)\nx + 1")
	rep, io := a.until(x, "execute_reply")
	assert.Equal(t, "ok", rep.text("status"))
	assert.Equal(t, "shell", rep.Channel)
	assert.Equal(t, "42\n", stdout(io))
	require.Len(t, io, 3)
	assert.Equal(t, "execute_result", io[2].MsgType)
	assert.Contains(t, string(io[2].Content), `"41"`)

	// The JSON client got the same iopub messages, in text frames.
	var seen []string
	for idle := false; !idle; {
		m, err := b.read(time.Minute)
		require.NoError(t, err)
		if m.parent() != x {
			continue
		}
		assert.NotEqual(t, "execute_reply", m.MsgType, "the reply is the requester's")
		idle = m.MsgType == "status" && m.text("execution_state") == "idle"
		if m.MsgType != "status" {
			seen = append(seen, m.MsgType)
		}
	}
	assert.Equal(t, []string{"execute_input", "stream", "execute_result"}, seen)

	info := a.send("shell", "kernel_info_request", map[string]any{})
	rep, _ = a.until(info, "kernel_info_reply")
	assert.Equal(t, "ok", rep.text("status"))
	assert.Contains(t, string(rep.Content), `"language_info"`)

	st = s.g.Stats()
	assert.Equal(t, int64(3), st.MessagesIn)
	assert.Greater(t, st.MessagesOut, int64(10), "a's and b's")
	assert.Equal(t, [len(st.Dropped)]int64{}, st.Dropped, "no client was dropped")
}

// TestChannelsV1BadFrames (3-9 s): what a v1 client cannot send. Each
// bad frame closes its own connection with a code and a reason and counts as
// a drop by cause; the kernel goes on. A client watching an agent's session
// is counted as such.
func TestChannelsV1BadFrames(t *testing.T) {
	t.Parallel()
	s := newGW(t, jupyterapi.Options{MaxFrameBytes: 64 << 10}, nil)
	id := s.start("default")
	header := []byte(`{"msg_id":"1","msg_type":"kernel_info_request","session":"s"}`)
	good := [][]byte{[]byte("shell"), header, []byte("{}"), []byte("{}"), []byte("{}")}
	// with returns the good frame with its offset i set to v.
	with := func(i int, v uint64) []byte {
		f := v1Raw(good...)
		binary.LittleEndian.PutUint64(f[8*(1+i):], v)
		return f
	}
	tooMany := append(append([][]byte{}, good...), make([][]byte, 17)...)
	for _, tc := range []struct {
		name   string
		typ    int
		frame  []byte
		code   int
		reason string
	}{
		{"text frame", websocket.TextMessage, []byte(`{"channel":"shell"}`), websocket.CloseUnsupportedData, "text frames"},
		{"shorter than its count", websocket.BinaryMessage, []byte{6, 0}, websocket.CloseInvalidFramePayloadData, "shorter"},
		{"shorter than its table", websocket.BinaryMessage, v1Raw(good...)[:40], websocket.CloseInvalidFramePayloadData, "shorter"},
		{"too few offsets", websocket.BinaryMessage, v1Raw(good[:4]...), websocket.CloseInvalidFramePayloadData, "offsets"},
		{"too many offsets", websocket.BinaryMessage, v1Raw(tooMany...), websocket.CloseInvalidFramePayloadData, "offsets"},
		{"a huge offset count", websocket.BinaryMessage, binary.LittleEndian.AppendUint64(nil, 1<<62), websocket.CloseInvalidFramePayloadData, "offsets"},
		{"offsets out of order", websocket.BinaryMessage, with(2, 60), websocket.CloseInvalidFramePayloadData, "before offset"},
		{"offset past the end", websocket.BinaryMessage, with(3, 1<<40), websocket.CloseInvalidFramePayloadData, "past the frame"},
		{"first offset inside the table", websocket.BinaryMessage, with(0, 8), websocket.CloseInvalidFramePayloadData, "first offset"},
		{"last offset short of the end", websocket.BinaryMessage, append(v1Raw(good...), '!'), websocket.CloseInvalidFramePayloadData, "last offset"},
		{"iopub from a client", websocket.BinaryMessage, v1Raw(append([][]byte{[]byte("iopub")}, good[1:]...)...), websocket.CloseInvalidFramePayloadData, "channel"},
		{"header not JSON", websocket.BinaryMessage, v1Raw(good[0], []byte("{"), good[2], good[3], good[4]), websocket.CloseInvalidFramePayloadData, "header is not JSON"},
		{"content not an object", websocket.BinaryMessage, v1Raw(good[0], header, good[2], good[3], []byte(`"x"`)), websocket.CloseInvalidFramePayloadData, "content"},
		{"no msg_id", websocket.BinaryMessage, v1Raw(good[0], []byte(`{"msg_type":"x"}`), good[2], good[3], good[4]), websocket.CloseInvalidFramePayloadData, "msg_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := s.dialProtocols(id, nil, []string{v1Protocol})
			require.NoError(t, err)
			require.NoError(t, c.c.WriteMessage(tc.typ, tc.frame))
			code, reason := c.closeCode(30 * time.Second)
			assert.Equal(t, tc.code, code)
			assert.Contains(t, reason, tc.reason)
		})
	}
	// A frame over MaxFrameBytes: the server closes at the limit (1009, or a
	// reset when the rest of the frame is still being written).
	c, _, err := s.dialProtocols(id, nil, []string{v1Protocol})
	require.NoError(t, err)
	if err := c.c.WriteMessage(websocket.BinaryMessage, v1Raw(good[0], header, good[2], good[3], []byte(`{"code":"`+strings.Repeat("#", 100<<10)+`"}`))); err == nil {
		code, _ := c.closeCode(30 * time.Second)
		assert.Contains(t, []int{websocket.CloseMessageTooBig, -1}, code)
	} else {
		assert.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE), "write: %v", err)
	}

	var want [len(jupyterapi.Stats{}.Dropped)]int64
	want[jupyterapi.DropMalformed], want[jupyterapi.DropUnsupported], want[jupyterapi.DropTooBig] = 13, 1, 1
	require.Eventually(t, func() bool { return s.g.Stats().Dropped == want }, 10*time.Second, 10*time.Millisecond,
		"drops by cause: %v", s.g.Stats().Dropped)

	// The kernel goes on; a watcher of an agent's session counts as one.
	ok := s.mustDial(id)
	x := ok.execute("print('alive')")
	rep, io := ok.until(x, "execute_reply")
	assert.Equal(t, "ok", rep.text("status"))
	assert.Equal(t, "alive\n", stdout(io))
	_, err = s.e.Execute(t.Context(), api.Request{SessionID: "agent-v1", Code: "1"})
	require.NoError(t, err)
	w, _, err := s.dialProtocols("agent-v1", nil, []string{v1Protocol})
	require.NoError(t, err)
	info := w.send("shell", "kernel_info_request", map[string]any{})
	rep, _ = w.until(info, "kernel_info_reply")
	assert.Equal(t, "ok", rep.text("status"))
	st := s.g.Stats()
	assert.Equal(t, int64(1), st.ClientsWatching)
	assert.Equal(t, int64(1), st.ClientsStarted)
	assert.Equal(t, int64(1), st.ClientsV1)
}
