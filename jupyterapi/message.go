package jupyterapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/kernelbox/kernelbox/jupyter"
)

// inMsg is a client's message in the legacy JSON protocol.
type inMsg struct {
	Channel      string          `json:"channel"`
	Header       json.RawMessage `json:"header"`
	ParentHeader json.RawMessage `json:"parent_header"`
	Metadata     json.RawMessage `json:"metadata"`
	Content      json.RawMessage `json:"content"`

	head header // Header, decoded
}

// header is the part of a message header kernelbox reads.
type header struct {
	MsgID   string `json:"msg_id"`
	MsgType string `json:"msg_type"`
	Session string `json:"session"`
}

// maxHeaderBytes bounds a client's header, which is sent back as the
// parent_header of every message that answers it.
const maxHeaderBytes = 4 << 10

var errMalformed = errors.New("malformed message")

// parseMsg decodes and checks one frame from a client in the legacy JSON
// protocol.
func parseMsg(frame []byte) (*inMsg, error) {
	var m inMsg
	if err := json.Unmarshal(frame, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return &m, nil
}

// check checks a client's message, whatever its framing, and decodes its
// header into m.head.
func (m *inMsg) check() error {
	switch {
	case len(m.Header) > maxHeaderBytes:
		return fmt.Errorf("%w: a header of %d bytes (at most %d)", errMalformed, len(m.Header), maxHeaderBytes)
	case len(m.Header) == 0:
		return fmt.Errorf("%w: no header", errMalformed)
	}
	if err := json.Unmarshal(m.Header, &m.head); err != nil {
		return fmt.Errorf("%w: header: %v", errMalformed, err)
	}
	switch {
	case m.head.MsgID == "" || len(m.head.MsgID) > 256:
		return fmt.Errorf("%w: header.msg_id must be 1-256 bytes", errMalformed)
	case m.head.MsgType == "" || len(m.head.MsgType) > 64:
		return fmt.Errorf("%w: header.msg_type must be 1-64 bytes", errMalformed)
	}
	switch m.Channel {
	case jupyter.ChannelShell, jupyter.ChannelControl, jupyter.ChannelStdin:
	default:
		return fmt.Errorf("%w: channel %s (a client sends on shell, control or stdin)", errMalformed, quote(m.Channel))
	}
	if len(m.Content) == 0 || m.Content[0] != '{' {
		if len(m.Content) != 0 && string(m.Content) != "null" {
			return fmt.Errorf("%w: content must be a JSON object", errMalformed)
		}
		m.Content = json.RawMessage("{}")
	}
	return nil
}

// outMsg is a message to a client in the legacy JSON protocol; msg_id and
// msg_type are repeated at the top, as Jupyter Server writes them (its gateway
// client reads them there).
type outMsg struct {
	Channel      string          `json:"channel"`
	Header       json.RawMessage `json:"header"`
	ParentHeader json.RawMessage `json:"parent_header"`
	Metadata     json.RawMessage `json:"metadata"`
	Content      any             `json:"content"`
	Buffers      []any           `json:"buffers"`
	MsgID        string          `json:"msg_id"`
	MsgType      string          `json:"msg_type"`
}

// frame builds a message of kernel k to clients: parent is the client's header
// it answers (nil for none).
func frame(k *kernel, parent json.RawMessage, channel, msgType string, content any) *outFrame {
	id := uuid.NewString()
	h, _ := json.Marshal(jupyter.Header{MsgID: id, MsgType: msgType, Session: k.session, Username: "kernelbox",
		Date: time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), Version: jupyter.ProtocolVersion})
	return &outFrame{m: outMsg{Channel: channel, Header: h, ParentHeader: orEmpty(parent), Metadata: json.RawMessage("{}"),
		Content: content, Buffers: []any{}, MsgID: id, MsgType: msgType}}
}

// relay builds the client's copy of a kernel's message m that answers the
// client's request whose header is parent.
func relay(m *jupyter.Message, parent json.RawMessage) *outFrame {
	h, _ := json.Marshal(m.Header)
	content := any(json.RawMessage("{}"))
	if len(m.Content) > 0 {
		content = m.Content
	}
	meta := m.Metadata
	if len(meta) == 0 {
		meta = json.RawMessage("{}")
	}
	return &outFrame{m: outMsg{Channel: m.Channel, Header: h, ParentHeader: orEmpty(parent), Metadata: meta,
		Content: content, Buffers: []any{}, MsgID: m.Header.MsgID, MsgType: m.Header.MsgType}}
}

func statusFrame(k *kernel, parent json.RawMessage, state string) *outFrame {
	return frame(k, parent, jupyter.ChannelIOPub, "status", map[string]string{"execution_state": state})
}

// encode frames m in the legacy JSON protocol.
func encode(m outMsg) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		// Only content kernelbox built itself reaches here, and it always
		// encodes; say so rather than send nothing.
		b, _ = json.Marshal(outMsg{Channel: m.Channel, Header: m.Header, ParentHeader: m.ParentHeader,
			Metadata: json.RawMessage("{}"), Content: map[string]string{"kernelbox_error": err.Error()},
			Buffers: []any{}, MsgID: m.MsgID, MsgType: m.MsgType})
	}
	return b
}

func orEmpty(h json.RawMessage) json.RawMessage {
	if len(h) == 0 {
		return json.RawMessage("{}")
	}
	return h
}
