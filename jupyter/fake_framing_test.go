package jupyter_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/jupyter/jupytertest"
	"github.com/stretchr/testify/require"
)

var protocols = []jupyter.Protocol{jupyter.ProtocolLegacy, jupyter.ProtocolV1}

// TestProtocolNegotiation checks which framing each client setting gets from servers
// with and without v1, and that each works end to end.
func TestProtocolNegotiation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		legacyOnly bool
		want       jupyter.Protocol
		ask        jupyter.Protocol
	}{
		{"auto-picks-v1", false, jupyter.ProtocolV1, jupyter.ProtocolAuto},
		{"legacy-when-asked", false, jupyter.ProtocolLegacy, jupyter.ProtocolLegacy},
		{"v1-when-required", false, jupyter.ProtocolV1, jupyter.ProtocolV1},
		{"auto-falls-back-on-legacy-server", true, jupyter.ProtocolLegacy, jupyter.ProtocolAuto},
		{"legacy-on-legacy-server", true, jupyter.ProtocolLegacy, jupyter.ProtocolLegacy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, &jupytertest.Options{LegacyOnly: tc.legacyOnly}, nil, &jupyter.ConnOptions{Protocol: tc.ask})
			require.Equal(t, tc.want, f.conn.Protocol())
			var got []*jupyter.Message
			r, err := f.conn.Run(testCtx(t), "héllo 😀 <&>", func(m *jupyter.Message) { got = append(got, m) })
			require.NoError(t, err)
			require.Equal(t, "ok", r.Status)
			require.Equal(t, []string{"stream:stdout:héllo 😀 <&>"}, summary(t, got))
		})
	}
	t.Run("v1-required-on-legacy-server", func(t *testing.T) {
		t.Parallel()
		srv := jupytertest.New(t, &jupytertest.Options{LegacyOnly: true})
		k := srv.AddKernel("")
		_, err := newClient(t, srv.Endpoint()).Connect(testCtx(t), k.ID, &jupyter.ConnOptions{Protocol: jupyter.ProtocolV1})
		require.ErrorContains(t, err, "does not speak "+jupyter.SubprotocolV1)
	})
}

// TestBuffers checks messages with binary buffers: binary frames in the legacy
// framing, extra parts in v1.
func TestBuffers(t *testing.T) {
	t.Parallel()
	bufs := [][]byte{[]byte("abc"), {0, 1, 2, 0xff}, {}}
	for _, proto := range protocols {
		t.Run(proto.String(), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, nil, func(k *jupytertest.Kernel, req *jupyter.Message) {
				if req.Type() != "execute_request" {
					jupytertest.DefaultHandler(k, req)
					return
				}
				k.Status(req, "busy")
				k.Publish(req, "comm_msg", map[string]any{"comm_id": "c1", "data": map[string]any{"é": 1}}, bufs...)
				k.Stream(req, "stdout", "after")
				k.Reply(req, okReply(1))
				k.Status(req, "idle")
			}, &jupyter.ConnOptions{Protocol: proto})
			out, err := drain(t, execute(t, f.conn, "widget"))
			require.NoError(t, err)
			require.Equal(t, []string{"comm_msg", "stream:stdout:after"}, summary(t, out))
			m := out[0]
			require.Equal(t, jupyter.ChannelIOPub, m.Channel)
			require.Len(t, m.Buffers, len(bufs))
			for i := range bufs {
				require.Equal(t, string(bufs[i]), string(m.Buffers[i]))
			}
			var c struct {
				CommID string         `json:"comm_id"`
				Data   map[string]int `json:"data"`
			}
			require.NoError(t, m.DecodeContent(&c))
			require.Equal(t, "c1", c.CommID)
			require.Equal(t, 1, c.Data["é"])
			require.Nil(t, out[1].Buffers)
		})
	}
}

// TestMalformedFrames checks that frames that cannot be decoded are dropped without
// disturbing the connection or the execution in flight.
func TestMalformedFrames(t *testing.T) {
	t.Parallel()
	be32 := func(v ...uint32) []byte {
		b := []byte{}
		for _, x := range v {
			b = binary.BigEndian.AppendUint32(b, x)
		}
		return b
	}
	le64 := func(v ...uint64) []byte {
		b := []byte{}
		for _, x := range v {
			b = binary.LittleEndian.AppendUint64(b, x)
		}
		return b
	}
	frames := map[jupyter.Protocol][]struct {
		name  string
		typ   int
		frame []byte
	}{
		jupyter.ProtocolLegacy: {
			{"not-json", websocket.TextMessage, []byte("this is not JSON")},
			{"json-cut-short", websocket.TextMessage, []byte(`{"header": {"msg_type": "stream"`)},
			{"wrong-types", websocket.TextMessage, []byte(`{"header": 5, "content": []}`)},
			{"empty-binary", websocket.BinaryMessage, nil},
			{"garbage-binary", websocket.BinaryMessage, []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3}},
			{"offsets-past-end", websocket.BinaryMessage, append(be32(2, 12, 9999), "{}"...)},
			{"offsets-into-table", websocket.BinaryMessage, append(be32(1, 0), "{}"...)},
			{"huge-count", websocket.BinaryMessage, be32(1<<31, 8)},
			{"binary-non-json", websocket.BinaryMessage, append(be32(1, 8), "nope"...)},
		},
		jupyter.ProtocolV1: {
			{"text-frame", websocket.TextMessage, []byte(`{"channel": "iopub"}`)},
			{"short", websocket.BinaryMessage, []byte{1, 2, 3}},
			{"garbage", websocket.BinaryMessage, []byte(strings.Repeat("\xff", 64))},
			{"too-few-offsets", websocket.BinaryMessage, le64(1, 16)},
			{"offsets-decreasing", websocket.BinaryMessage, append(le64(6, 56, 60, 58, 60, 60, 60), "iopub"...)},
			{"offset-past-end", websocket.BinaryMessage, append(le64(6, 56, 61, 61, 61, 61, 9999), "iopub"...)},
			{"bad-header-json", websocket.BinaryMessage, append(le64(6, 56, 61, 62, 64, 66, 68), "iopub{{}{}{}"...)},
		},
	}
	for _, proto := range protocols {
		t.Run(proto.String(), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, nil, func(k *jupytertest.Kernel, req *jupyter.Message) {
				if req.Type() != "execute_request" {
					jupytertest.DefaultHandler(k, req)
					return
				}
				k.Status(req, "busy")
				for i, fr := range frames[proto] {
					k.Raw(fr.typ, fr.frame)
					k.Stream(req, "stdout", fr.name)
					if i == 3 {
						k.Reply(req, okReply(1))
					}
				}
				k.Status(req, "idle")
			}, &jupyter.ConnOptions{Protocol: proto})
			out, err := drain(t, execute(t, f.conn, "x"))
			require.NoError(t, err)
			var want []string
			for _, fr := range frames[proto] {
				want = append(want, "stream:stdout:"+fr.name)
			}
			require.Equal(t, want, summary(t, out))
			require.NoError(t, f.conn.Err())
			require.Equal(t, 1, f.kernel.Connections(), "no reconnect was needed")
		})
	}
}

// TestOversized checks that a message larger than MaxMessageBytes is cut, not fatal:
// a stream keeps the start of its text, marked Truncated, and the execution goes on.
func TestOversized(t *testing.T) {
	t.Parallel()
	const limit = 4000
	big := strings.Repeat("0123456789", 2000)
	for _, proto := range protocols {
		t.Run(proto.String(), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, nil, func(k *jupytertest.Kernel, req *jupyter.Message) {
				if req.Type() != "execute_request" {
					jupytertest.DefaultHandler(k, req)
					return
				}
				k.Status(req, "busy")
				k.Stream(req, "stderr", big)
				k.Display(req, map[string]any{"text/plain": big})
				// Metadata too large for the headers to fit: dropped or emptied, never fatal.
				m := &jupyter.Message{Channel: jupyter.ChannelIOPub, Header: jupyter.Header{MsgID: "m1", MsgType: "stream"},
					ParentHeader: req.Header, Metadata: mustMarshal(t, map[string]string{"pad": big}),
					Content: mustMarshal(t, jupyter.StreamContent{Name: "stdout", Text: "lost"})}
				k.Send(m)
				k.Stream(req, "stdout", "small")
				k.Reply(req, okReply(1))
				k.Status(req, "idle")
			}, &jupyter.ConnOptions{Protocol: proto, MaxMessageBytes: limit})
			out, err := drain(t, execute(t, f.conn, "x"))
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(out), 3)
			require.Equal(t, "stream:stdout:small", summary(t, out[len(out)-1:])[0])

			var st jupyter.StreamContent
			require.NoError(t, out[0].DecodeContent(&st))
			require.True(t, out[0].Truncated)
			require.Equal(t, "stderr", st.Name)
			require.True(t, strings.HasPrefix(big, st.Text))
			require.Greater(t, len(st.Text), limit-1000)
			require.LessOrEqual(t, len(st.Text), limit)
			require.Greater(t, out[0].DroppedBytes, int64(len(big)-limit))

			require.Equal(t, "display_data", out[1].Type())
			require.True(t, out[1].Truncated)
			require.JSONEq(t, "{}", string(out[1].Content), "only stream text is salvaged")
			require.Positive(t, out[1].DroppedBytes)

			for _, m := range out[2 : len(out)-1] { // the message with huge metadata, if kept
				require.True(t, m.Truncated)
			}
			require.NoError(t, f.conn.Err())
		})
	}
}

// TestOversizedCutCharacters moves the cut of an oversized stream message across
// every byte of multi-byte characters (v1 sends raw UTF-8) and of \u escapes and
// surrogate pairs (the legacy framing escapes non-ASCII as Python's json.dumps does):
// the salvaged text is always valid UTF-8 and a prefix of the original.
func TestOversizedCutCharacters(t *testing.T) {
	t.Parallel()
	const limit = 3000
	unit := "é😀€\"\\\n\t" // 2-, 4- and 3-byte characters, and escapes of one and two bytes
	text := strings.Repeat(unit, 2*limit/len(unit))
	for _, proto := range protocols {
		t.Run(proto.String(), func(t *testing.T) {
			t.Parallel()
			const shifts = 24 // more than the longest escape (\ud83d\ude00, 12 bytes)
			f := newFake(t, nil, func(k *jupytertest.Kernel, req *jupyter.Message) {
				if req.Type() != "execute_request" {
					jupytertest.DefaultHandler(k, req)
					return
				}
				k.Status(req, "busy")
				for i := range shifts {
					k.Stream(req, "stdout", strings.Repeat("a", i)+text)
				}
				k.Reply(req, okReply(1))
				k.Status(req, "idle")
			}, &jupyter.ConnOptions{Protocol: proto, MaxMessageBytes: limit})
			out, err := drain(t, execute(t, f.conn, "x"))
			require.NoError(t, err)
			require.Len(t, out, shifts)
			lengths := map[int]bool{}
			for i, m := range out {
				require.True(t, m.Truncated)
				var st jupyter.StreamContent
				require.NoError(t, m.DecodeContent(&st))
				require.True(t, utf8.ValidString(st.Text), "shift %d: invalid UTF-8", i)
				orig := strings.Repeat("a", i) + text
				require.True(t, strings.HasPrefix(orig, st.Text), "shift %d: %q is not a prefix", i, st.Text)
				require.Greater(t, len(st.Text), (limit-1000)/3, "shift %d", i)
				lengths[len(st.Text)-i] = true
			}
			require.Greater(t, len(lengths), 1, "the cut moved across characters")
		})
	}
}

// TestSmallMaxMessageBytes checks that a limit below the reader's initial buffer size
// is honoured too.
func TestSmallMaxMessageBytes(t *testing.T) {
	t.Parallel()
	const limit = 1500
	text := strings.Repeat("x", 3000)
	for _, proto := range protocols {
		t.Run(proto.String(), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, nil, func(k *jupytertest.Kernel, req *jupyter.Message) {
				if req.Type() != "execute_request" {
					jupytertest.DefaultHandler(k, req)
					return
				}
				k.Status(req, "busy")
				k.Stream(req, "stdout", text)
				k.Reply(req, okReply(1))
				k.Status(req, "idle")
			}, &jupyter.ConnOptions{Protocol: proto, MaxMessageBytes: limit})
			out, err := drain(t, execute(t, f.conn, "x"))
			require.NoError(t, err)
			require.Len(t, out, 1)
			require.True(t, out[0].Truncated)
			var st jupyter.StreamContent
			require.NoError(t, out[0].DecodeContent(&st))
			require.Less(t, len(st.Text), limit)
			require.True(t, strings.HasPrefix(text, st.Text))
		})
	}
}

func mustMarshal(t testing.TB, v any) json.RawMessage {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// TestBase64Content: a request whose payload is encoded as it is written (larger
// than the write buffer, so it goes out in several fragments, and not a multiple
// of the encoder's block) reaches the kernel as one message whose content is
// Head, the payload's standard base64, and Tail, in both framings.
func TestBase64Content(t *testing.T) {
	t.Parallel()
	data := make([]byte, 3<<20+1)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, proto := range protocols {
		t.Run(proto.String(), func(t *testing.T) {
			t.Parallel()
			got := make(chan *jupyter.Message, 1)
			f := newFake(t, nil, func(k *jupytertest.Kernel, req *jupyter.Message) {
				if req.Type() == "execute_request" {
					got <- req
					k.Reply(req, okReply(1))
					return
				}
				jupytertest.DefaultHandler(k, req)
			}, &jupyter.ConnOptions{Protocol: proto})
			content := &jupyter.Base64Content{Head: []byte(`{"code":"","kernelbox":{"data":"`), Data: data, Tail: []byte(`"}}`)}
			reply, err := f.conn.Request(testCtx(t), jupyter.ChannelShell, "execute_request", content)
			require.NoError(t, err)
			require.Equal(t, "execute_reply", reply.Type())
			req := <-got
			var c struct {
				Code      string `json:"code"`
				Kernelbox struct {
					Data []byte `json:"data"` // encoding/json decodes standard base64
				} `json:"kernelbox"`
			}
			require.NoError(t, req.DecodeContent(&c))
			require.True(t, bytes.Equal(data, c.Kernelbox.Data), "the payload arrived intact (%d bytes of %d)", len(c.Kernelbox.Data), len(data))

			// The connection goes on with ordinary requests.
			_, err = f.conn.KernelInfo(testCtx(t))
			require.NoError(t, err)
		})
	}
}
