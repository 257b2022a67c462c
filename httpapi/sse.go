package httpapi

import (
	"github.com/kernelbox/kernelbox/api"

	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/kernelbox/kernelbox/calls"
)

// CallIDHeader carries the call id of every execute answer (JSON, SSE or 202).
const CallIDHeader = "Kernelbox-Call-Id"

// stream sends a call's events as Server-Sent Events, from its log: the events
// after seq after ("stream", "display", "update_display", "result", "error",
// "clear_output", "status"; "truncated" for events dropped from the log before
// this reader got them), each with "id: <seq>", then "done" carrying the Result,
// or "failed" carrying an ErrorBody (and the Result, if any) when the call could
// not run. announce first sends a "call" event with the call's id.
//
// The stream reads the log at the client's pace: a client that stops reading
// holds up only this handler (until StreamWriteTimeout), never the call.
func (h *handler) stream(w http.ResponseWriter, r *http.Request, c *calls.Call, after int64, announce bool) {
	if _, ok := w.(http.Flusher); !ok {
		writeError(w, http.StatusNotAcceptable, api.CodeInvalidRequest, "streaming is not supported on this connection")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sw := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: h.o.StreamWriteTimeout}
	if announce {
		sw.event("call", "", api.DetachedCall{CallID: c.ID(), SessionID: c.SessionID()})
	}
	for sw.err == nil {
		if !sw.flush() {
			return
		}
		b, err := c.Read(r.Context(), after)
		if err != nil {
			return // the client went away
		}
		if t := b.Truncated; t != nil {
			sw.event("truncated", strconv.FormatInt(t.To, 10), api.Event{Type: "truncated", Truncation: t})
		}
		for _, ev := range b.Events {
			sw.event(ev.Type, strconv.FormatInt(ev.Seq, 10), ev.Event)
		}
		after = b.Last(after)
		if b.Done {
			h.final(sw, c, after+1)
			sw.flush()
			return
		}
	}
}

// final sends the call's last event, numbered seq.
func (h *handler) final(sw *sseWriter, c *calls.Call, seq int64) {
	id := strconv.FormatInt(seq, 10)
	res, err := c.Final()
	if err != nil {
		status, code := classify(err)
		body := map[string]any{"error": ErrorDetail{Code: code, Message: err.Error()}, "http_status": status}
		if res != nil {
			body["result"] = res
		}
		sw.event("failed", id, body)
		return
	}
	sw.event("done", id, res)
}

// sseWriter buffers events and writes them in one go per batch, each write
// bounded by a deadline. After an error it writes nothing more.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     bytes.Buffer
	err     error
}

func (s *sseWriter) event(name, id string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	s.buf.WriteString("event: " + name + "\n")
	if id != "" {
		s.buf.WriteString("id: " + id + "\n")
	}
	s.buf.WriteString("data: ")
	s.buf.Write(b)
	s.buf.WriteString("\n\n")
}

// flush writes the buffered events; it reports whether the stream is still good.
func (s *sseWriter) flush() bool {
	if s.err != nil {
		return false
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, s.err = s.w.Write(s.buf.Bytes()); s.err == nil {
		s.err = s.rc.Flush()
	}
	s.buf.Reset()
	return s.err == nil
}
