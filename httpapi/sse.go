package httpapi

import (
	"github.com/kernelbox/kernelbox/api"

	"encoding/json"
	"net/http"
	"sync"

	"github.com/kernelbox/kernelbox/executor"
)

// executeSSE streams a call as Server-Sent Events: one event per output as it
// happens ("stream", "display", "update_display", "result", "error", "clear_output",
// "status"), then "done" carrying the Result, or "failed" carrying an ErrorBody when
// the call could not run.
func (h *handler) executeSSE(w http.ResponseWriter, r *http.Request, req executor.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusNotAcceptable, api.CodeInvalidRequest, "streaming is not supported on this connection")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	var mu sync.Mutex
	send := func(event string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		_, _ = w.Write([]byte("event: " + event + "\ndata: "))
		_, _ = w.Write(b)
		_, _ = w.Write([]byte("\n\n"))
		fl.Flush()
	}
	res, err := h.e.ExecuteStream(r.Context(), req, func(ev executor.Event) {
		send(ev.Type, ev)
	})
	if err != nil {
		status, code := classify(err)
		body := map[string]any{"error": ErrorDetail{Code: code, Message: err.Error()}, "http_status": status}
		if res != nil {
			body["result"] = res
		}
		send("failed", body)
		return
	}
	send("done", res)
}
