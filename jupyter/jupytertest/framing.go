package jupytertest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"github.com/kernelbox/kernelbox/jupyter"
)

// The fake writes frames the way Jupyter Server 1.x does, independently of the client's
// own codec, so that tests cross-check the two:
//
//   - legacy text: json.dumps of the message dict, whose keys come in the order header,
//     msg_id, msg_type, parent_header, metadata, content, buffers, channel, with
//     non-ASCII characters escaped as \uXXXX (surrogate pairs above U+FFFF);
//   - legacy binary, for messages with buffers: a big-endian uint32 part count, the
//     uint32 offsets of the parts from the start of the frame, the JSON (without
//     "buffers"), then the buffers;
//   - v1: a little-endian uint64 offset count, the uint64 offsets, the channel, then
//     header, parent_header, metadata and content as UTF-8 JSON, then the buffers.

// encodeFrame returns the frame type and bytes for m in the given framing.
func encodeFrame(m *jupyter.Message, v1 bool) (int, []byte, error) {
	if v1 {
		b, err := encodeV1(m)
		return websocket.BinaryMessage, b, err
	}
	js, err := legacyJSON(m, len(m.Buffers) == 0)
	if err != nil {
		return 0, nil, err
	}
	if len(m.Buffers) == 0 {
		return websocket.TextMessage, js, nil
	}
	return websocket.BinaryMessage, legacyBinary(js, m.Buffers), nil
}

func legacyJSON(m *jupyter.Message, withBuffers bool) ([]byte, error) {
	header, err := json.Marshal(m.Header)
	if err != nil {
		return nil, err
	}
	parent, err := json.Marshal(m.ParentHeader)
	if err != nil {
		return nil, err
	}
	str := func(s string) []byte { b, _ := json.Marshal(s); return b }
	var b bytes.Buffer
	b.WriteString(`{"header": `)
	b.Write(header)
	b.WriteString(`, "msg_id": `)
	b.Write(str(m.Header.MsgID))
	b.WriteString(`, "msg_type": `)
	b.Write(str(m.Header.MsgType))
	b.WriteString(`, "parent_header": `)
	b.Write(parent)
	b.WriteString(`, "metadata": `)
	b.Write(orEmpty(m.Metadata))
	b.WriteString(`, "content": `)
	b.Write(orEmpty(m.Content))
	if withBuffers {
		b.WriteString(`, "buffers": []`)
	}
	b.WriteString(`, "channel": `)
	b.Write(str(m.Channel))
	b.WriteString(`}`)
	return asciiEscape(b.Bytes()), nil
}

func legacyBinary(js []byte, buffers [][]byte) []byte {
	parts := append([][]byte{js}, buffers...)
	n := len(parts)
	out := make([]byte, 4*(n+1))
	binary.BigEndian.PutUint32(out, uint32(n))
	off := 4 * (n + 1)
	for i, p := range parts {
		binary.BigEndian.PutUint32(out[4*(i+1):], uint32(off))
		off += len(p)
	}
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func encodeV1(m *jupyter.Message) ([]byte, error) {
	header, err := json.Marshal(m.Header)
	if err != nil {
		return nil, err
	}
	parent, err := json.Marshal(m.ParentHeader)
	if err != nil {
		return nil, err
	}
	parts := [][]byte{[]byte(m.Channel), header, parent, orEmpty(m.Metadata), orEmpty(m.Content)}
	parts = append(parts, m.Buffers...)
	n := len(parts) + 1 // the start of each part, and the end of the last
	out := make([]byte, 8*(n+1))
	binary.LittleEndian.PutUint64(out, uint64(n))
	off := 8 * (n + 1)
	for i, p := range parts {
		binary.LittleEndian.PutUint64(out[8*(i+1):], uint64(off))
		off += len(p)
	}
	binary.LittleEndian.PutUint64(out[8*n:], uint64(off))
	for _, p := range parts {
		out = append(out, p...)
	}
	return out, nil
}

var errFrame = errors.New("malformed frame")

// decodeFrame decodes a client frame.
func decodeFrame(frameType int, data []byte, v1 bool) (*jupyter.Message, error) {
	switch {
	case v1:
		return decodeV1(data)
	case frameType == websocket.BinaryMessage:
		return decodeLegacyBinary(data)
	default:
		var m jupyter.Message
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("%w: %v", errFrame, err)
		}
		return &m, nil
	}
}

func decodeLegacyBinary(data []byte) (*jupyter.Message, error) {
	if len(data) < 4 {
		return nil, errFrame
	}
	n := int(binary.BigEndian.Uint32(data))
	if n < 1 || len(data) < 4*(n+1) {
		return nil, errFrame
	}
	offs := make([]int, n+1)
	for i := range n {
		offs[i] = int(binary.BigEndian.Uint32(data[4*(i+1):]))
	}
	offs[n] = len(data)
	for i := range n {
		if offs[i] < 4*(n+1) || offs[i] > offs[i+1] {
			return nil, errFrame
		}
	}
	var m jupyter.Message
	if err := json.Unmarshal(data[offs[0]:offs[1]], &m); err != nil {
		return nil, fmt.Errorf("%w: %v", errFrame, err)
	}
	for i := 1; i < n; i++ {
		m.Buffers = append(m.Buffers, data[offs[i]:offs[i+1]])
	}
	return &m, nil
}

func decodeV1(data []byte) (*jupyter.Message, error) {
	if len(data) < 8 {
		return nil, errFrame
	}
	n := binary.LittleEndian.Uint64(data)
	if n < 6 || n > 1<<16 || uint64(len(data)) < 8*(n+1) {
		return nil, errFrame
	}
	offs := make([]uint64, n)
	for i := range offs {
		offs[i] = binary.LittleEndian.Uint64(data[8*(i+1):])
		if offs[i] < 8*(n+1) || offs[i] > uint64(len(data)) || (i > 0 && offs[i] < offs[i-1]) {
			return nil, errFrame
		}
	}
	part := func(i int) []byte { return data[offs[i]:offs[i+1]] }
	m := &jupyter.Message{Channel: string(part(0)), Metadata: part(3), Content: part(4)}
	if err := json.Unmarshal(part(1), &m.Header); err != nil {
		return nil, fmt.Errorf("%w: %v", errFrame, err)
	}
	if err := json.Unmarshal(part(2), &m.ParentHeader); err != nil {
		return nil, fmt.Errorf("%w: %v", errFrame, err)
	}
	for i := 5; i+1 < len(offs); i++ {
		m.Buffers = append(m.Buffers, part(i))
	}
	return m, nil
}

func orEmpty(r json.RawMessage) []byte {
	if len(r) == 0 {
		return []byte("{}")
	}
	return r
}

// asciiEscape rewrites every non-ASCII character of a JSON text as a \u escape, as
// Python's json.dumps does by default. Non-ASCII bytes occur only inside strings, so
// the result is equivalent JSON.
func asciiEscape(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			out = append(out, b[i])
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		i += size
		if r > 0xFFFF {
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
			continue
		}
		out = fmt.Appendf(out, `\u%04x`, r)
	}
	return out
}
