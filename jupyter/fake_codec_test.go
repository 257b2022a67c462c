package jupyter

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// Frames written by Jupyter Server 1.23's own serializers (serialize_msg_to_ws_v1 and
// serialize_binary_message in jupyter_server/base/zmqhandlers.py) for one comm_msg with
// two buffers, {"comm_id": "c", "data": {"é": 1}}, parent p1.
var (
	pythonV1Frame = mustHex(
		"080000000000000048000000000000004d00000000000000d00000000000000062010000000000006401000000000000" +
			"87010000000000008a010000000000008e01000000000000696f7075627b226d73675f6964223a20226d31222c20226d" +
			"73675f74797065223a2022636f6d6d5f6d7367222c202273657373696f6e223a20227331222c2022757365726e616d65" +
			"223a202275222c202264617465223a2022323032342d30312d30315430303a30303a30302e3030303030305a222c2022" +
			"76657273696f6e223a2022352e33227d7b226d73675f6964223a20227031222c20226d73675f74797065223a20226578" +
			"65637574655f72657175657374222c202273657373696f6e223a20226331222c2022757365726e616d65223a20226b65" +
			"726e656c626f78222c202264617465223a2022323032342d30312d30315430303a30303a30302e3030303030305a222c" +
			"202276657273696f6e223a2022352e33227d7b7d7b22636f6d6d5f6964223a202263222c202264617461223a207b22c3" +
			"a9223a20317d7d0001ff62756632")
	pythonLegacyBinaryFrame = mustHex(
		"0000000300000010000001c4000001c77b22686561646572223a207b226d73675f6964223a20226d31222c20226d7367" +
			"5f74797065223a2022636f6d6d5f6d7367222c202273657373696f6e223a20227331222c2022757365726e616d65223a" +
			"202275222c202264617465223a2022323032342d30312d30315430303a30303a30302e3030303030305a222c20227665" +
			"7273696f6e223a2022352e33227d2c20226d73675f6964223a20226d31222c20226d73675f74797065223a2022636f6d" +
			"6d5f6d7367222c2022706172656e745f686561646572223a207b226d73675f6964223a20227031222c20226d73675f74" +
			"797065223a2022657865637574655f72657175657374222c202273657373696f6e223a20226331222c2022757365726e" +
			"616d65223a20226b65726e656c626f78222c202264617465223a2022323032342d30312d30315430303a30303a30302e" +
			"3030303030305a222c202276657273696f6e223a2022352e33227d2c20226d65746164617461223a207b7d2c2022636f" +
			"6e74656e74223a207b22636f6d6d5f6964223a202263222c202264617461223a207b225c7530306539223a20317d7d2c" +
			"20226368616e6e656c223a2022696f707562227d0001ff62756632")
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func requirePythonComm(t *testing.T, m *Message) {
	t.Helper()
	require.Equal(t, ChannelIOPub, m.Channel)
	require.Equal(t, Header{MsgID: "m1", MsgType: "comm_msg", Session: "s1", Username: "u", Date: "2024-01-01T00:00:00.000000Z", Version: "5.3"}, m.Header)
	require.Equal(t, "p1", m.ParentID())
	require.Equal(t, "execute_request", m.ParentHeader.MsgType)
	var c struct {
		CommID string         `json:"comm_id"`
		Data   map[string]int `json:"data"`
	}
	require.NoError(t, m.DecodeContent(&c))
	require.Equal(t, "c", c.CommID)
	require.Equal(t, map[string]int{"é": 1}, c.Data)
	require.Equal(t, [][]byte{{0, 1, 0xff}, []byte("buf2")}, m.Buffers)
}

func TestDecodePythonFrames(t *testing.T) {
	t.Parallel()
	m, err := decodeV1(pythonV1Frame)
	require.NoError(t, err)
	requirePythonComm(t, m)
	require.JSONEq(t, "{}", string(m.Metadata))

	m, err = decodeLegacyBinary(pythonLegacyBinaryFrame)
	require.NoError(t, err)
	requirePythonComm(t, m)
}

func TestV1RoundTrip(t *testing.T) {
	t.Parallel()
	for _, content := range []any{
		ExecuteRequest{Code: "print('é😀')\n", UserExpressions: map[string]string{}},
		struct{}{},
		map[string]string{"text": string(bytes.Repeat([]byte("x"), 100_000))},
	} {
		m, err := newMessage("session-1", ChannelShell, "execute_request", content)
		require.NoError(t, err)
		frame, err := encodeV1(m)
		require.NoError(t, err)
		got, err := decodeV1(frame)
		require.NoError(t, err)
		require.Equal(t, m.Channel, got.Channel)
		require.Equal(t, m.Header, got.Header)
		require.Equal(t, Header{}, got.ParentHeader, "client messages have an empty parent")
		require.JSONEq(t, "{}", string(got.Metadata))
		require.JSONEq(t, string(m.Content), string(got.Content))
		require.Nil(t, got.Buffers)

		// The layout Jupyter Server's deserialize_msg_from_ws_v1 expects: 6 offsets,
		// the first right after the table, the last the end of the frame.
		require.Equal(t, uint64(6), binary.LittleEndian.Uint64(frame))
		require.Equal(t, uint64(56), binary.LittleEndian.Uint64(frame[8:]))
		require.Equal(t, uint64(len(frame)), binary.LittleEndian.Uint64(frame[48:]))
		require.Equal(t, "shell", string(frame[56:61]))
	}
}

func TestEncodeLegacy(t *testing.T) {
	t.Parallel()
	m, err := newMessage("session-1", ChannelControl, "interrupt_request", map[string]string{"k": "é<>"})
	require.NoError(t, err)
	frame, err := encodeLegacy(m)
	require.NoError(t, err)
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(frame, &raw))
	require.ElementsMatch(t, []string{"channel", "header", "parent_header", "metadata", "content", "buffers"}, keys(raw))
	require.JSONEq(t, "{}", string(raw["parent_header"]))
	require.JSONEq(t, "{}", string(raw["metadata"]))
	require.JSONEq(t, "[]", string(raw["buffers"]))
	got, err := decodeLegacyText(frame)
	require.NoError(t, err)
	require.Equal(t, m.Header, got.Header)
	require.Equal(t, ChannelControl, got.Channel)
	require.JSONEq(t, string(m.Content), string(got.Content))
}

func keys(m map[string]json.RawMessage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestDecodeLegacyBinary(t *testing.T) {
	t.Parallel()
	be := func(v ...uint32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.BigEndian.AppendUint32(b, x)
		}
		return b
	}
	js := `{"channel":"iopub","header":{"msg_type":"stream"},"parent_header":{"msg_id":"p"},"content":{"text":"t"}}`
	for _, tc := range []struct {
		name    string
		frame   []byte
		buffers int
		bad     bool
	}{
		{"no-buffers", append(be(1, 8), js...), 0, false},
		{"two-buffers", append(append(be(3, 16, 16+uint32(len(js)), 16+uint32(len(js))+2), js...), "abcd"...), 2, false},
		{"empty-buffer-at-end", append(be(2, 12, 12+uint32(len(js))), js...), 1, false},
		{"empty", nil, 0, true},
		{"count-only", be(1), 0, true},
		{"zero-parts", be(0, 4), 0, true},
		{"table-past-end", be(5, 8), 0, true},
		{"offset-inside-table", append(be(1, 4), js...), 0, true},
		{"offset-past-end", append(be(2, 12, 9999), js...), 0, true},
		{"offsets-decreasing", append(be(2, 20, 12), js...), 0, true},
		{"not-json", append(be(1, 8), "nope"...), 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := decodeLegacyBinary(tc.frame)
			if tc.bad {
				require.True(t, errors.Is(err, errMalformed), "%v", err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "stream", m.Type())
			require.Equal(t, "p", m.ParentID())
			require.Len(t, m.Buffers, tc.buffers)
		})
	}
}

func TestV1PartsTruncated(t *testing.T) {
	t.Parallel()
	m, err := newMessage("s", ChannelIOPub, "stream", StreamContent{Name: "stdout", Text: "hello world"})
	require.NoError(t, err)
	frame, err := encodeV1(m)
	require.NoError(t, err)
	cut := frame[:len(frame)-8]
	_, err = decodeV1(cut)
	require.ErrorIs(t, err, errMalformed, "a cut frame is not a complete one")
	channel, parts, err := v1Parts(cut, true)
	require.NoError(t, err)
	require.Equal(t, ChannelIOPub, channel)
	require.Len(t, parts, 4)
	require.Equal(t, string(m.Content[:len(m.Content)-8]), string(parts[3]))

	_, _, err = v1Parts(frame[:40], true)
	require.ErrorIs(t, err, errMalformed, "cut inside the offset table")
}

func TestProtocolString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "auto", ProtocolAuto.String())
	require.Equal(t, "legacy", ProtocolLegacy.String())
	require.Equal(t, "v1", ProtocolV1.String())
}

// TestReadLimitedExact: messages come back whole, a small one (read through the
// shared scratch buffers) at its exact size, and never share memory (a message read
// before another is not overwritten by it); a message over the limit keeps its
// first max bytes and reports its whole length.
func TestReadLimitedExact(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789"), 100_000)
	a, n, err := readLimited(bytes.NewReader(big), 1<<20)
	require.NoError(t, err)
	require.EqualValues(t, len(big), n)
	require.Equal(t, big, a)
	s1, _, err := readLimited(bytes.NewReader(big[:1000]), 1<<20)
	require.NoError(t, err)
	require.LessOrEqual(t, cap(s1), 1024, "a small message keeps no slack")
	s2, n, err := readLimited(bytes.NewReader([]byte("small")), 1<<20)
	require.NoError(t, err)
	require.EqualValues(t, 5, n)
	require.Equal(t, "small", string(s2))
	require.Equal(t, big[:1000], s1, "the message read before is intact")
	require.Equal(t, big, a, "the large message is intact")
	c, n, err := readLimited(bytes.NewReader(big), 4096)
	require.NoError(t, err)
	require.EqualValues(t, len(big), n)
	require.Equal(t, big[:4096], c)
	c, n, err = readLimited(bytes.NewReader(big), 200_000)
	require.NoError(t, err)
	require.EqualValues(t, len(big), n)
	require.Equal(t, big[:200_000], c)
	e, n, err := readLimited(bytes.NewReader(nil), 4096)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, e)
}

// encodeLegacy encodes a client message as a legacy JSON text frame. Client messages
// never carry buffers.
func encodeLegacy(m *Message) ([]byte, error) {
	return encodeWhole(m, ProtocolLegacy)
}

// encodeV1 encodes a client message as a v1 binary frame: a little-endian uint64 count
// of offsets, the offsets, the channel name, then header, parent header, metadata and
// content as separate JSON parts.
func encodeV1(m *Message) ([]byte, error) {
	return encodeWhole(m, ProtocolV1)
}

// encodeWhole assembles a client message's frame in memory, as Conn.write sends
// it in parts.
func encodeWhole(m *Message, proto Protocol) ([]byte, error) {
	head, tail, err := frameParts(m, proto)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(head) + m.contentLen() + len(tail))
	b.Write(head)
	if err := m.writeContent(&b); err != nil {
		return nil, err
	}
	b.Write(tail)
	return b.Bytes(), nil
}
