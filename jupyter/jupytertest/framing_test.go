package jupytertest

import (
	"encoding/json"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/stretchr/testify/require"
)

func TestFramingRoundTrip(t *testing.T) {
	t.Parallel()
	m := &jupyter.Message{
		Channel:      jupyter.ChannelIOPub,
		Header:       jupyter.Header{MsgID: "m", MsgType: "stream", Session: "k"},
		ParentHeader: jupyter.Header{MsgID: "p"},
		Metadata:     json.RawMessage(`{"a":1}`),
		Content:      json.RawMessage(`{"name":"stdout","text":"é😀"}`),
	}
	for _, tc := range []struct {
		name      string
		v1        bool
		buffers   [][]byte
		frameType int
	}{
		{"legacy", false, nil, websocket.TextMessage},
		{"legacy-buffers", false, [][]byte{[]byte("ab"), {}}, websocket.BinaryMessage},
		{"v1", true, nil, websocket.BinaryMessage},
		{"v1-buffers", true, [][]byte{[]byte("ab"), {0}}, websocket.BinaryMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := *m
			in.Buffers = tc.buffers
			frameType, data, err := encodeFrame(&in, tc.v1)
			require.NoError(t, err)
			require.Equal(t, tc.frameType, frameType)
			if !tc.v1 && tc.buffers == nil {
				require.NotContains(t, string(data), "é", "legacy JSON is ASCII, as Python writes it")
				require.Contains(t, string(data), `\u00e9\ud83d\ude00`)
			}
			out, err := decodeFrame(frameType, data, tc.v1)
			require.NoError(t, err)
			require.Equal(t, in.Channel, out.Channel)
			require.Equal(t, in.Header, out.Header)
			require.Equal(t, in.ParentHeader, out.ParentHeader)
			require.JSONEq(t, string(in.Metadata), string(out.Metadata))
			require.JSONEq(t, string(in.Content), string(out.Content))
			require.Equal(t, len(tc.buffers), len(out.Buffers))
			for i := range tc.buffers {
				require.Equal(t, string(tc.buffers[i]), string(out.Buffers[i]))
			}
		})
	}
}

func TestDecodeFrameRejectsGarbage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		frameType int
		data      []byte
		v1        bool
	}{
		{websocket.TextMessage, []byte("nope"), false},
		{websocket.BinaryMessage, []byte{0, 0, 0, 9}, false},
		{websocket.BinaryMessage, []byte{1, 2, 3}, true},
		{websocket.BinaryMessage, make([]byte, 64), true},
	} {
		_, err := decodeFrame(tc.frameType, tc.data, tc.v1)
		require.ErrorIs(t, err, errFrame)
	}
}
