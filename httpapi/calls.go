package httpapi

import (
	"github.com/kernelbox/kernelbox/api"

	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// call answers GET /v1/calls/{call_id}: the call's CallInfo, with its Result
// when it is done. A call dropped by retention is 410 (call_expired), an id
// never given out 404.
func (h *handler) call(w http.ResponseWriter, r *http.Request) {
	c, err := h.calls.Get(r.PathValue("call_id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c.Info(true, false))
}

// callEvents answers GET /v1/calls/{call_id}/events: the call's events as SSE
// from the start, or after the seq in Last-Event-ID (or ?after=N).
func (h *handler) callEvents(w http.ResponseWriter, r *http.Request) {
	c, err := h.calls.Get(r.PathValue("call_id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	done := isDone(c) // before LastSeq: once done, the last seq is final
	after, err := resumeAfter(r, c.LastSeq(), done)
	if err != nil {
		writeErr(w, err)
		return
	}
	h.stream(w, r, c, after, true)
}

func isDone(c interface{ Done() <-chan struct{} }) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

// resumeAfter reads the seq to resume after: Last-Event-ID, else ?after=N, else
// 0. It must be an event id the call has given out: 0..last, or last+1 (the
// final event's) once the call is done, which resumes at the final event.
func resumeAfter(r *http.Request, last int64, done bool) (int64, error) {
	raw, from := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if raw == "" {
		raw, from = r.URL.Query().Get("after"), "after"
	}
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %s %q is not an event id (a sequence number >= 0)", api.ErrInvalidRequest, from, raw)
	}
	limit := last
	if done {
		limit = last + 1
	}
	if n > limit {
		return 0, fmt.Errorf("%w: %s %d is past the call's last event (%d)", api.ErrInvalidRequest, from, n, limit)
	}
	return min(n, last), nil
}

// cancelCall answers POST /v1/calls/{call_id}/cancel: 204 once the call is told
// to stop (a queued call is dropped, a running one interrupted; its Result says
// so), 409 (call_finished) when it has already ended.
func (h *handler) cancelCall(w http.ResponseWriter, r *http.Request) {
	if err := h.calls.Cancel(r.PathValue("call_id")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// sessionCalls answers GET /v1/sessions/{id}/calls: the session's calls the
// registry still keeps, newest first, without Results and with code clipped.
func (h *handler) sessionCalls(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !api.ValidSessionID(id) {
		writeErr(w, fmt.Errorf("%w: session id %q: use %s", api.ErrInvalidRequest, id, api.SessionIDRule))
		return
	}
	list := h.calls.List(id)
	out := make([]api.CallInfo, 0, len(list))
	for _, c := range list {
		out = append(out, c.Info(false, true))
	}
	writeJSON(w, http.StatusOK, map[string]any{"calls": out})
}
