package jupyterapi

import (
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestV1RoundTrip: what encodeV1 frames, parseV1 reads back part for part (a
// client's buffers after the content accepted and dropped),
// and every strict prefix of it is refused, never read past.
func TestV1RoundTrip(t *testing.T) {
	t.Parallel()
	m := outMsg{Channel: "shell", Header: json.RawMessage(`{"msg_id":"m1","msg_type":"kernel_info_request"}`),
		ParentHeader: json.RawMessage(`{"msg_id":"p"}`), Metadata: json.RawMessage(`{"k":1}`),
		Content: map[string]string{"code": "print('é')"}}
	f := encodeV1(m)
	got, err := parseV1(f)
	require.NoError(t, err)
	assert.Equal(t, "shell", got.Channel)
	assert.JSONEq(t, string(m.Header), string(got.Header))
	assert.JSONEq(t, string(m.ParentHeader), string(got.ParentHeader))
	assert.JSONEq(t, string(m.Metadata), string(got.Metadata))
	assert.JSONEq(t, `{"code":"print('é')"}`, string(got.Content))
	assert.Equal(t, "m1", got.head.MsgID)
	// Buffers after the content are accepted and dropped.
	parts := [][]byte{[]byte("shell"), m.Header, m.ParentHeader, m.Metadata, []byte(`{"code":"print('é')"}`), []byte("a"), []byte("b")}
	withBufs := binary.LittleEndian.AppendUint64(nil, uint64(len(parts)+1))
	off := 8 * (len(parts) + 2)
	for _, p := range parts {
		withBufs = binary.LittleEndian.AppendUint64(withBufs, uint64(off))
		off += len(p)
	}
	withBufs = binary.LittleEndian.AppendUint64(withBufs, uint64(off))
	for _, p := range parts {
		withBufs = append(withBufs, p...)
	}
	got, err = parseV1(withBufs)
	require.NoError(t, err)
	assert.JSONEq(t, `{"code":"print('é')"}`, string(got.Content))
	for n := range len(f) {
		_, err := parseV1(f[:n])
		require.ErrorIs(t, err, errMalformed, "a prefix of %d bytes", n)
	}
}
