package jupyter

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"time"

	"github.com/google/uuid"
)

// ProtocolVersion is the Jupyter messaging protocol version kernelbox speaks.
const ProtocolVersion = "5.3"

// Channel names.
const (
	ChannelShell   = "shell"
	ChannelIOPub   = "iopub"
	ChannelControl = "control"
	ChannelStdin   = "stdin"
)

// Header is a Jupyter message header. A parent header that is empty ({}) decodes to
// the zero Header.
type Header struct {
	MsgID    string `json:"msg_id,omitempty"`
	MsgType  string `json:"msg_type,omitempty"`
	Session  string `json:"session,omitempty"`
	Username string `json:"username,omitempty"`
	Date     string `json:"date,omitempty"`
	Version  string `json:"version,omitempty"`
}

// Message is one Jupyter message as carried over the WebSocket. Content and Metadata
// are kept as raw JSON and decoded on demand with [Message.DecodeContent].
type Message struct {
	Channel      string          `json:"channel"`
	Header       Header          `json:"header"`
	ParentHeader Header          `json:"parent_header"`
	Metadata     json.RawMessage `json:"metadata"`
	Content      json.RawMessage `json:"content"`
	Buffers      [][]byte        `json:"-"`

	// Truncated is set when the message arrived larger than the connection's
	// MaxMessageBytes: Content then holds what could be salvaged (for a stream
	// message, the start of its text) and DroppedBytes how much was discarded.
	Truncated    bool  `json:"-"`
	DroppedBytes int64 `json:"-"`

	payload *Base64Content // a request's content, when it was given as one
}

// Base64Content is request content whose last string is base64 written as the
// message goes out, so that a large payload is neither encoded into a buffer of
// its own nor copied into a frame: the content is Head, then Data in standard
// base64, then Tail. Head must end inside a JSON string (after its opening
// quote) and Tail close it and the object. Data must not change until the request
// has been sent.
type Base64Content struct {
	Head, Data, Tail []byte
}

// base64Block is how many bytes of a payload are encoded at a time (a multiple of
// 3, so that only the last block has padding).
const base64Block = 24 << 10

// contentLen returns the length of m's content as written.
func (m *Message) contentLen() int {
	if p := m.payload; p != nil {
		return len(p.Head) + base64.StdEncoding.EncodedLen(len(p.Data)) + len(p.Tail)
	}
	return len(rawOrEmpty(m.Content))
}

// writeContent writes m's content to w.
func (m *Message) writeContent(w io.Writer) error {
	p := m.payload
	if p == nil {
		_, err := w.Write(rawOrEmpty(m.Content))
		return err
	}
	if _, err := w.Write(p.Head); err != nil {
		return err
	}
	buf := make([]byte, base64.StdEncoding.EncodedLen(base64Block))
	for d := p.Data; len(d) > 0; {
		n := min(len(d), base64Block)
		base64.StdEncoding.Encode(buf, d[:n])
		if _, err := w.Write(buf[:base64.StdEncoding.EncodedLen(n)]); err != nil {
			return err
		}
		d = d[n:]
	}
	_, err := w.Write(p.Tail)
	return err
}

// Type returns the message type from the header.
func (m *Message) Type() string { return m.Header.MsgType }

// ParentID returns the msg_id of the request this message answers, or "".
func (m *Message) ParentID() string { return m.ParentHeader.MsgID }

// DecodeContent unmarshals the message content into v, as encoding/json does (a
// *StreamContent is decoded faster, to the same result).
func (m *Message) DecodeContent(v any) error {
	if len(m.Content) == 0 {
		return json.Unmarshal([]byte("{}"), v)
	}
	if sc, ok := v.(*StreamContent); ok {
		if s, ok := decodeStream(m.Content); ok {
			mergeStream(sc, s)
			return nil
		}
	}
	return json.Unmarshal(m.Content, v)
}

// mergeStream stores what decodeStream found as encoding/json would: into the
// fields the content names, leaving the others as they were.
func mergeStream(dst *StreamContent, s streamFields) {
	if s.hasName {
		dst.Name = s.Name
	}
	if s.hasText {
		dst.Text = s.Text
	}
}

// newMessage builds a request message for the given channel and type. A
// content that is a json.RawMessage is taken as it is (not copied, compacted
// or checked: it must be one JSON object), so a caller that built a large
// content itself does not pay for a second copy of it; a *Base64Content is
// written as the message is sent.
func newMessage(session, channel, msgType string, content any) (*Message, error) {
	var raw json.RawMessage
	var payload *Base64Content
	switch c := content.(type) {
	case *Base64Content:
		payload = c
	case json.RawMessage:
		raw = c
	default:
		var err error
		if raw, err = json.Marshal(content); err != nil {
			return nil, err
		}
	}
	return &Message{
		payload: payload,
		Channel: channel,
		Header: Header{
			MsgID:    uuid.NewString(),
			MsgType:  msgType,
			Session:  session,
			Username: "kernelbox",
			Date:     time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
			Version:  ProtocolVersion,
		},
		Metadata: json.RawMessage("{}"),
		Content:  raw,
	}, nil
}

// ExecuteRequest is the content of an execute_request. AllowStdin is always sent as
// false: a cell that calls input() fails at once instead of hanging.
type ExecuteRequest struct {
	Code            string            `json:"code"`
	Silent          bool              `json:"silent"`
	StoreHistory    bool              `json:"store_history"`
	UserExpressions map[string]string `json:"user_expressions"`
	AllowStdin      bool              `json:"allow_stdin"`
	StopOnError     bool              `json:"stop_on_error"`
}

// ExecuteReply is the content of an execute_reply. Status is "ok", "error" or
// "aborted"; aborted replies carry no execution count.
type ExecuteReply struct {
	Status          string                     `json:"status"`
	ExecutionCount  int                        `json:"execution_count"`
	UserExpressions map[string]json.RawMessage `json:"user_expressions,omitempty"`
	Ename           string                     `json:"ename,omitempty"`
	Evalue          string                     `json:"evalue,omitempty"`
	Traceback       []string                   `json:"traceback,omitempty"`

	// Foreign is not in the protocol: kernelbox's kernel launcher adds it, the
	// characters of output that threads started by earlier cells wrote while this
	// cell ran (0 from any other kernel).
	Foreign int `json:"kernelbox_foreign,omitempty"`
}

// StreamContent is the content of a stream message.
type StreamContent struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// DisplayContent is the content of display_data, update_display_data and
// execute_result messages (ExecutionCount only for execute_result).
type DisplayContent struct {
	Data           map[string]json.RawMessage `json:"data"`
	Metadata       map[string]json.RawMessage `json:"metadata"`
	Transient      map[string]json.RawMessage `json:"transient,omitempty"`
	ExecutionCount int                        `json:"execution_count,omitempty"`
}

// ErrorContent is the content of an iopub error message.
type ErrorContent struct {
	Ename     string   `json:"ename"`
	Evalue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// ClearOutputContent is the content of a clear_output message.
type ClearOutputContent struct {
	Wait bool `json:"wait"`
}

// StatusContent is the content of an iopub status message.
type StatusContent struct {
	ExecutionState string `json:"execution_state"`
}
