package jupyterapi

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/kernelbox/kernelbox/jupyter"
)

// How a connection frames its messages: the legacy JSON protocol (one text
// frame, a JSON object per message) or Jupyter Server's binary
// v1.kernel.websocket.jupyter.org subprotocol, chosen at the upgrade when the
// client offers it. Only the framing differs: both decode to an inMsg that
// client.handle acts on, and a message to clients (an outFrame) is encoded
// once per protocol, whichever clients need it.

// protocol is a connection's framing.
type protocol int

const (
	protoJSON protocol = iota // the legacy JSON protocol
	protoV1                   // v1.kernel.websocket.jupyter.org
)

// protocolOf is the framing of a connection upgraded with subprotocol sub.
func protocolOf(sub string) protocol {
	if sub == jupyter.SubprotocolV1 {
		return protoV1
	}
	return protoJSON
}

// frameType is the WebSocket message type p sends and accepts.
func (p protocol) frameType() int {
	if p == protoV1 {
		return websocket.BinaryMessage
	}
	return websocket.TextMessage
}

// decode decodes and checks one client frame of type typ. On error it returns
// the close code to end the connection with.
func (p protocol) decode(typ int, data []byte) (*inMsg, int, error) {
	if typ != p.frameType() {
		if p == protoV1 {
			return nil, closeUnsupported, fmt.Errorf("text frames are not supported: this connection speaks the binary %s subprotocol", jupyter.SubprotocolV1)
		}
		return nil, closeUnsupported, fmt.Errorf("binary frames are not supported: this connection speaks the legacy JSON protocol (offer %s for binary)", jupyter.SubprotocolV1)
	}
	var m *inMsg
	var err error
	if p == protoV1 {
		m, err = parseV1(data)
	} else {
		m, err = parseMsg(data)
	}
	if err != nil {
		return nil, closeInvalid, err
	}
	return m, 0, nil
}

// outFrame is a message to clients, encoded for each protocol on first use:
// a broadcast is encoded at most twice, however many clients it goes to.
type outFrame struct {
	m outMsg

	jsonOnce, v1Once sync.Once
	json, v1         []byte
}

// bytes returns f framed in protocol p.
func (f *outFrame) bytes(p protocol) []byte {
	if p == protoV1 {
		f.v1Once.Do(func() { f.v1 = encodeV1(f.m) })
		return f.v1
	}
	f.jsonOnce.Do(func() { f.json = encode(f.m) })
	return f.json
}

// v1Parts is the parts of a v1 message before its buffers: the channel,
// header, parent_header, metadata and content.
const v1Parts = 5

// maxV1Buffers bounds the buffers a client's v1 frame may carry (kernelbox
// drops them, as the JSON protocol's "buffers": no kernel request it passes on
// takes any).
const maxV1Buffers = 16

// encodeV1 frames m in the v1 protocol: a little-endian uint64 count of
// offsets, the offsets (from the frame's start; the last is its end), then the
// channel and the header, parent_header, metadata and content as JSON, and no
// buffers (kernelbox sends none).
func encodeV1(m outMsg) []byte {
	content, err := json.Marshal(m.Content)
	if err != nil {
		// As encode: only content kernelbox built reaches here; say so.
		content, _ = json.Marshal(map[string]string{"kernelbox_error": err.Error()})
	}
	parts := [][]byte{[]byte(m.Channel), m.Header, orEmpty(m.ParentHeader), orEmpty(m.Metadata), content}
	n := len(parts) + 1
	off := 8 * (1 + n)
	size := off
	for _, p := range parts {
		size += len(p)
	}
	b := make([]byte, 8*(1+n), size)
	binary.LittleEndian.PutUint64(b, uint64(n))
	for i, p := range parts {
		binary.LittleEndian.PutUint64(b[8*(1+i):], uint64(off))
		off += len(p)
	}
	binary.LittleEndian.PutUint64(b[8*n:], uint64(off))
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// parseV1 decodes and checks one binary frame from a client: the offset table
// within the frame, starting right after itself, never decreasing, ending at
// the frame's end; a UTF-8 channel; four JSON parts; at most maxV1Buffers
// buffers (dropped). Then the checks every message passes (check).
func parseV1(frame []byte) (*inMsg, error) {
	bad := func(format string, args ...any) (*inMsg, error) {
		return nil, fmt.Errorf("%w: v1 frame: "+format, append([]any{errMalformed}, args...)...)
	}
	if len(frame) < 8 {
		return bad("%d bytes, shorter than its offset count", len(frame))
	}
	n := binary.LittleEndian.Uint64(frame)
	if n < v1Parts+1 || n > v1Parts+1+maxV1Buffers {
		return bad("%d offsets (a channel, 4 JSON parts and at most %d buffers take %d to %d)", n, maxV1Buffers, v1Parts+1, v1Parts+1+maxV1Buffers)
	}
	table := 8 * (1 + int(n)) // n is small: no overflow
	if len(frame) < table {
		return bad("%d bytes, shorter than its table of %d offsets", len(frame), n)
	}
	offs := make([]int, n)
	for i := range offs {
		o := binary.LittleEndian.Uint64(frame[8*(1+i):])
		switch {
		case o > uint64(len(frame)):
			return bad("offset %d is %d, past the frame's end (%d)", i, o, len(frame))
		case i == 0 && int(o) != table:
			return bad("the first offset is %d, not the end of the offset table (%d)", o, table)
		case i > 0 && int(o) < offs[i-1]:
			return bad("offset %d (%d) is before offset %d (%d)", i, o, i-1, offs[i-1])
		}
		offs[i] = int(o)
	}
	if offs[n-1] != len(frame) {
		return bad("the last offset is %d, not the frame's end (%d)", offs[n-1], len(frame))
	}
	part := func(i int) []byte { return frame[offs[i]:offs[i+1]] }
	channel := part(0)
	if !utf8.Valid(channel) {
		return bad("the channel is not UTF-8")
	}
	names := [...]string{"header", "parent_header", "metadata", "content"}
	for i, name := range names {
		if !json.Valid(part(1 + i)) {
			return bad("%s is not JSON", name)
		}
	}
	m := &inMsg{Channel: string(channel), Header: part(1), ParentHeader: part(2), Metadata: part(3), Content: part(4)}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}
