package api

import "encoding/json"

// Event is one thing that happened during a streamed call, in order: a status
// change, a chunk of a stream, a rich output, an error.
type Event struct {
	// Type is "status", "stream", "display", "update_display", "result", "error" or
	// "clear_output"; "truncated" in a call's event log (see Truncation); "comm" for
	// the callers that ask for them (Request.Comms) and a session's watchers.
	Type string `json:"type"`

	// State is set for status events: "queued" (waiting behind other calls of the
	// session), "starting" (a kernel is being started), "running".
	State string `json:"state,omitempty"`

	// Name and Text are set for stream events: one chunk of stdout or stderr.
	Name string `json:"name,omitempty"`
	Text string `json:"text,omitempty"`

	// Output is set for display, update_display, result and error events.
	Output *Output `json:"output,omitempty"`

	// Wait is set for clear_output events that wait for the next output.
	Wait bool `json:"wait,omitempty"`

	// MsgType and Comm are set for comm events: a comm_open, comm_msg or
	// comm_close the call's code sent (a widget it displays), with its content.
	MsgType string          `json:"msg_type,omitempty"`
	Comm    json.RawMessage `json:"comm,omitempty"`

	// Truncation is set for truncated events: the events of a call's log that
	// were dropped (to keep the log within its bound) before this reader got them.
	Truncation *Truncation `json:"truncation,omitempty"`
}
