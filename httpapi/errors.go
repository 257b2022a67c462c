package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// ErrorBody is the JSON body of every non-2xx answer; see api.ErrorBody.
type ErrorBody = api.ErrorBody

// ErrorDetail is a machine-readable code and a human-readable message.
type ErrorDetail = api.ErrorDetail

// classify maps an executor or workspace error to an HTTP status and code
// (executor.ErrorCode, which the MCP tools use too).
func classify(err error) (int, api.Code) {
	code, status := executor.ErrorCode(err)
	return status, code
}

func writeError(w http.ResponseWriter, status int, code api.Code, msg string) {
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
}

func writeErr(w http.ResponseWriter, err error) {
	status, code := classify(err)
	msg := err.Error()
	if a := advice(code); a != "" {
		msg += " (" + a + ")"
	}
	writeError(w, status, code, msg)
}

// advice is what a client of this API can do about an error of kind code, or "":
// the executor states facts, the front end knows its routes and flags.
func advice(code api.Code) string {
	switch code {
	case api.CodeTooManySessions:
		return "close one with DELETE /v1/sessions/{id} or `kernelbox reset`, or start the server with a higher --max-sessions"
	case api.CodeTooManyNotebookRuns:
		return "retry when one has finished, or start the server with a higher --max-notebook-runs"
	}
	return ""
}

// writeJSON answers v as JSON, encoded whole before the first byte goes out:
// the answer has a Content-Length (no chunked encoding for a client to undo,
// whatever its size) and leaves in as few writes as net/http can make, and a
// value that cannot be encoded is a 500 instead of a cut body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := jsonBufs.Get().(*bytes.Buffer)
	defer putJSONBuf(buf)
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		buf.Reset()
		status = http.StatusInternalServerError
		_ = json.NewEncoder(buf).Encode(ErrorBody{Error: ErrorDetail{Code: api.CodeInternal, Message: "encode the answer: " + err.Error()}})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// jsonBufs keeps writeJSON's buffers between answers; one that grew past
// maxPooledJSON (a large Result) is left to the garbage collector, so the pool
// holds at most a few small buffers.
var jsonBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledJSON = 64 << 10

func putJSONBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooledJSON {
		jsonBufs.Put(b)
	}
}
