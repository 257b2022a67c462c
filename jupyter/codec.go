package jupyter

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// SubprotocolV1 is the binary kernel WebSocket protocol of Jupyter Server ≥ 1.19. With it
// the server forwards kernel messages without decoding and re-encoding them as JSON.
const SubprotocolV1 = "v1.kernel.websocket.jupyter.org"

// Protocol selects the WebSocket framing.
type Protocol int

const (
	// ProtocolAuto offers v1 and falls back to legacy when the server does not pick it.
	ProtocolAuto Protocol = iota
	// ProtocolLegacy uses the legacy JSON framing only.
	ProtocolLegacy
	// ProtocolV1 requires the v1 binary framing; connecting fails without it.
	ProtocolV1
)

// String returns "auto", "legacy" or "v1".
func (p Protocol) String() string {
	switch p {
	case ProtocolLegacy:
		return "legacy"
	case ProtocolV1:
		return "v1"
	default:
		return "auto"
	}
}

var errMalformed = errors.New("malformed message")

// A client message is written as a head, its content, and a tail, so that a large
// content goes to the socket without being copied into a frame first (Conn.write).

// legacyTail closes a legacy frame after its content.
var legacyTail = []byte(`,"buffers":[]}`)

// frameParts returns what a client message's frame holds before its content and
// after it.
func frameParts(m *Message, proto Protocol) (head, tail []byte, err error) {
	h, err := json.Marshal(&m.Header)
	if err != nil {
		return nil, nil, err
	}
	meta := rawOrEmpty(m.Metadata)
	if proto != ProtocolV1 {
		var b bytes.Buffer
		b.Grow(128 + len(h) + len(meta))
		b.WriteString(`{"channel":`)
		writeJSONString(&b, m.Channel)
		b.WriteString(`,"header":`)
		b.Write(h)
		b.WriteString(`,"parent_header":{},"metadata":`)
		b.Write(meta)
		b.WriteString(`,"content":`)
		return b.Bytes(), legacyTail, nil
	}
	parts := [][]byte{[]byte(m.Channel), h, []byte("{}"), meta}
	n := len(parts) + 2 // offsets: the start of each part, the content's, and the end
	size := 8 * (n + 1)
	for _, p := range parts {
		size += len(p)
	}
	out := make([]byte, 8*(n+1), size)
	binary.LittleEndian.PutUint64(out, uint64(n))
	off := uint64(8 * (n + 1))
	for i, p := range parts {
		binary.LittleEndian.PutUint64(out[8*(i+1):], off)
		off += uint64(len(p))
	}
	binary.LittleEndian.PutUint64(out[8*(n-1):], off)
	binary.LittleEndian.PutUint64(out[8*n:], off+uint64(m.contentLen()))
	for _, p := range parts {
		out = append(out, p...)
	}
	return out, nil, nil
}

// decodeLegacyText decodes a legacy JSON text frame.
func decodeLegacyText(data []byte) (*Message, error) {
	var m Message
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	return &m, nil
}

// decodeLegacyBinary decodes a legacy binary frame: a big-endian uint32 count of parts,
// their uint32 offsets from the start of the frame, then the JSON message and the
// buffers.
func decodeLegacyBinary(data []byte) (*Message, error) {
	if len(data) < 4 {
		return nil, fmt.Errorf("%w: binary frame of %d bytes", errMalformed, len(data))
	}
	n := int(binary.BigEndian.Uint32(data))
	if n < 1 || n > 1<<16 || len(data) < 4*(n+1) {
		return nil, fmt.Errorf("%w: binary frame with %d parts in %d bytes", errMalformed, n, len(data))
	}
	offs := make([]int, n+1)
	for i := 0; i < n; i++ {
		offs[i] = int(binary.BigEndian.Uint32(data[4*(i+1):]))
	}
	offs[n] = len(data)
	for i := 0; i < n; i++ {
		if offs[i] < 4*(n+1) || offs[i] > offs[i+1] {
			return nil, fmt.Errorf("%w: bad binary offsets", errMalformed)
		}
	}
	m, err := decodeLegacyText(data[offs[0]:offs[1]])
	if err != nil {
		return nil, err
	}
	for i := 1; i < n; i++ {
		m.Buffers = append(m.Buffers, data[offs[i]:offs[i+1]])
	}
	return m, nil
}

// v1Parts splits a v1 frame into its channel and message parts. With truncated set,
// the frame may be cut short: parts past the end are shortened or left out.
func v1Parts(data []byte, truncated bool) (channel string, parts [][]byte, err error) {
	if len(data) < 8 {
		return "", nil, fmt.Errorf("%w: v1 frame of %d bytes", errMalformed, len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n < 2 || n > 1<<16 || uint64(len(data)) < 8*(n+1) {
		return "", nil, fmt.Errorf("%w: v1 frame with %d offsets in %d bytes", errMalformed, n, len(data))
	}
	offs := make([]uint64, n)
	for i := range offs {
		offs[i] = binary.LittleEndian.Uint64(data[8*(i+1):])
	}
	end := uint64(len(data))
	for i := range offs {
		if offs[i] < 8*(n+1) || (i > 0 && offs[i] < offs[i-1]) {
			return "", nil, fmt.Errorf("%w: bad v1 offsets", errMalformed)
		}
		if offs[i] > end {
			if !truncated {
				return "", nil, fmt.Errorf("%w: v1 offset past the frame", errMalformed)
			}
			offs[i] = end
		}
	}
	channel = string(data[offs[0]:offs[1]])
	for i := 1; i+1 < len(offs); i++ {
		parts = append(parts, data[offs[i]:offs[i+1]])
	}
	return channel, parts, nil
}

// decodeV1 decodes a complete v1 binary frame.
func decodeV1(data []byte) (*Message, error) {
	channel, parts, err := v1Parts(data, false)
	if err != nil {
		return nil, err
	}
	if len(parts) < 4 {
		return nil, fmt.Errorf("%w: v1 frame with %d parts", errMalformed, len(parts))
	}
	m := &Message{Channel: channel, Metadata: parts[2], Content: parts[3]}
	if err := json.Unmarshal(parts[0], &m.Header); err != nil {
		return nil, fmt.Errorf("%w: header: %v", errMalformed, err)
	}
	if err := json.Unmarshal(parts[1], &m.ParentHeader); err != nil {
		return nil, fmt.Errorf("%w: parent header: %v", errMalformed, err)
	}
	if len(parts) > 4 {
		m.Buffers = parts[4:]
	}
	return m, nil
}

func rawOrEmpty(r json.RawMessage) []byte {
	if len(r) == 0 {
		return []byte("{}")
	}
	return r
}

func writeJSONString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s) // a string always marshals
	b.Write(q)
}
