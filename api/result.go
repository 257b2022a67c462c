package api

import "encoding/json"

// Status is how a call ended.
type Status string

// The statuses a Result can carry.
const (
	// StatusOK: the code ran to completion.
	StatusOK Status = "ok"
	// StatusError: the code raised; Result.Error has the exception.
	StatusError Status = "error"
	// StatusTimeout: the deadline passed and the code was interrupted. The
	// session's state survived unless Result.StateLost is set.
	StatusTimeout Status = "timeout"
	// StatusKernelDied: the kernel (or its server or container) died during the
	// call; Result.Error says why when it is known. The next call gets a fresh
	// kernel.
	StatusKernelDied Status = "kernel_died"
	// StatusDenied: the permission policy refused the call; nothing ran.
	StatusDenied Status = "denied"
)

// Result is the outcome of one call. Outputs is in nbformat v4 shape and order, so it
// can be written into an .ipynb cell unchanged; Stdout, Stderr, Result and Error are
// the same content in convenient form.
type Result struct {
	SessionID      string `json:"session_id"`
	Status         Status `json:"status"`
	ExecutionCount int    `json:"execution_count,omitempty"`

	// Outputs are the cell's outputs: streams merged when consecutive,
	// clear_output and update_display_data applied.
	Outputs []Output `json:"outputs"`

	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// Result is the text/plain form of the cell's value (execute_result), if any.
	Result string `json:"result,omitempty"`
	// Error describes the exception, timeout or death, for every status but ok.
	Error *ErrorInfo `json:"error,omitempty"`

	// Artifacts lists files new or changed since the previous call. A file still
	// being written is marked Partial; Notes say which were written between the
	// calls or are still being written (by a background thread or process).
	Artifacts []Artifact `json:"artifacts"`

	// Truncated is set when output was dropped to stay within the caps;
	// TruncationNote says what and how much.
	Truncated      bool   `json:"truncated"`
	TruncationNote string `json:"truncation_note,omitempty"`

	// StateLost is set when the session's variables are gone: the kernel was
	// restarted (after a death, a timeout it ignored, or a server or container
	// failure) before or during this call.
	StateLost bool `json:"state_lost"`

	// StateRestored is set when the session's namespace was restored from a
	// snapshot before this call ran (after a hibernation, or as a fork): what
	// came back and what did not, and why. A snapshot that could not be read
	// sets StateLost instead, with the reason in Notes.
	StateRestored *StateRestored `json:"state_restored,omitempty"`

	// Notes are short remarks for the caller, for example that the kernel was
	// restarted, or that an input was staged.
	Notes []string `json:"notes,omitempty"`

	DurationMS int64 `json:"duration_ms"`
}

// ErrorInfo describes why a call did not end with status ok.
type ErrorInfo struct {
	// Ename is the exception class (e.g. "ZeroDivisionError"), or "Timeout",
	// "KernelDied", "PermissionDenied" for the executor's own statuses.
	Ename  string `json:"ename"`
	Evalue string `json:"evalue"`
	// Traceback is the formatted traceback without ANSI color codes.
	Traceback []string `json:"traceback,omitempty"`
}

// Artifact is a file the code produced: a file under outputs/ that was new or
// changed after the call, or a rich output (image, HTML) of the cell, copied into the
// shared artifacts directory.
type Artifact struct {
	// Path is the host path of the artifact.
	Path string `json:"path"`

	// Name is the path relative to the session's artifacts directory, slash-
	// separated: for collected outputs, the path relative to outputs/; for saved
	// display data, "display/<name>".
	Name string `json:"name"`

	// Size is the artifact's size in bytes.
	Size int64 `json:"size"`

	// SHA256 is the hex SHA-256 of the content. Collecting and saving fill it in;
	// listings leave it empty rather than hash every file each time.
	SHA256 string `json:"sha256,omitempty"`

	// MIME is the media type, from the extension or else sniffed from the content.
	MIME string `json:"mime"`

	// Partial is set when the file was still being written when it was collected
	// (a process held it open for writing, or it changed while it was copied): the
	// copy is what it held so far. It is collected, and reported, again once it
	// changes or is complete.
	Partial bool `json:"partial,omitempty"`
}

// Output is one nbformat v4 output. Which fields are set depends on OutputType:
// "stream" (Name, Text), "display_data" (Data, Metadata), "execute_result" (Data,
// Metadata, ExecutionCount) or "error" (Ename, Evalue, Traceback).
type Output struct {
	OutputType     string
	Name           string
	Text           string
	Data           map[string]json.RawMessage
	Metadata       map[string]json.RawMessage
	ExecutionCount *int
	Ename          string
	Evalue         string
	Traceback      []string

	// DisplayID is the display id from the message's transient data, used to
	// apply update_display_data. It is not part of nbformat.
	DisplayID string

	// Artifacts maps each rich MIME type of Data (see RichTypes) that the
	// executor saved as an artifact to that artifact's Name. It is not part of
	// nbformat and not sent on the wire: it serves front ends that hold the
	// executor's Result itself.
	Artifacts map[string]string `json:"-"`
}

// MarshalJSON writes the output in nbformat v4 form, with exactly the fields its
// output type requires.
func (o Output) MarshalJSON() ([]byte, error) {
	switch o.OutputType {
	case "stream":
		return json.Marshal(struct {
			OutputType string `json:"output_type"`
			Name       string `json:"name"`
			Text       string `json:"text"`
		}{o.OutputType, o.Name, o.Text})
	case "error":
		tb := o.Traceback
		if tb == nil {
			tb = []string{}
		}
		return json.Marshal(struct {
			OutputType string   `json:"output_type"`
			Ename      string   `json:"ename"`
			Evalue     string   `json:"evalue"`
			Traceback  []string `json:"traceback"`
		}{o.OutputType, o.Ename, o.Evalue, tb})
	case "execute_result":
		return json.Marshal(struct {
			OutputType     string                     `json:"output_type"`
			Data           map[string]json.RawMessage `json:"data"`
			Metadata       map[string]json.RawMessage `json:"metadata"`
			ExecutionCount *int                       `json:"execution_count"`
		}{o.OutputType, nonNil(o.Data), nonNil(o.Metadata), o.ExecutionCount})
	default:
		return json.Marshal(struct {
			OutputType string                     `json:"output_type"`
			Data       map[string]json.RawMessage `json:"data"`
			Metadata   map[string]json.RawMessage `json:"metadata"`
		}{o.OutputType, nonNil(o.Data), nonNil(o.Metadata)})
	}
}

// UnmarshalJSON reads an nbformat v4 output (text may be a string or a list of
// strings, as nbformat allows).
func (o *Output) UnmarshalJSON(b []byte) error {
	var raw struct {
		OutputType     string                     `json:"output_type"`
		Name           string                     `json:"name"`
		Text           json.RawMessage            `json:"text"`
		Data           map[string]json.RawMessage `json:"data"`
		Metadata       map[string]json.RawMessage `json:"metadata"`
		ExecutionCount *int                       `json:"execution_count"`
		Ename          string                     `json:"ename"`
		Evalue         string                     `json:"evalue"`
		Traceback      []string                   `json:"traceback"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*o = Output{
		OutputType: raw.OutputType, Name: raw.Name, Data: raw.Data, Metadata: raw.Metadata,
		ExecutionCount: raw.ExecutionCount, Ename: raw.Ename, Evalue: raw.Evalue, Traceback: raw.Traceback,
	}
	text, err := MultilineString(raw.Text)
	if err != nil {
		return err
	}
	o.Text = text
	return nil
}

// MultilineString decodes an nbformat multiline string: a JSON string, or a list of
// strings to concatenate. Empty input decodes to "".
func MultilineString(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []string
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, 0, n)
	for _, p := range parts {
		b = append(b, p...)
	}
	return string(b), nil
}

func nonNil(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return map[string]json.RawMessage{}
	}
	return m
}
