package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
)

// execute starts a registered call: the call belongs to the registry, not to
// this request, so a dropped connection neither cancels nor loses it.
func (h *handler) execute(w http.ResponseWriter, r *http.Request) {
	req, detach, err := h.request(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	if !detach && !wantsSSE(r) {
		// The plain call runs on this goroutine (see calls.Registry.Run): it
		// still belongs to the registry, so a dropped connection neither
		// cancels nor loses it; this handler returns when it has ended.
		c, err := h.calls.Run(r.Context(), req)
		if err != nil {
			writeErr(w, err)
			return
		}
		if r.Context().Err() != nil {
			return // the client is gone; the call has its answer in the registry
		}
		w.Header().Set(CallIDHeader, c.ID())
		res, err := c.Final()
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
		return
	}
	c, err := h.calls.Start(r.Context(), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set(CallIDHeader, c.ID())
	if detach {
		writeJSON(w, http.StatusAccepted, api.DetachedCall{CallID: c.ID(), SessionID: c.SessionID()})
		return
	}
	h.stream(w, r, c, 0, true)
}

func wantsSSE(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// sessions lists the sessions the request's token may see: all of them for
// the admin token, those in a scoped token's reach for it.
func (h *handler) sessions(w http.ResponseWriter, r *http.Request) {
	list := h.e.Sessions()
	if p := principalOf(r); !p.IsAdmin() && h.o.Tokens != nil {
		mine := list[:0:0]
		for _, s := range list {
			if p.MaySee(s.ID, h.o.Tokens.Owner(s.ID)) {
				mine = append(mine, s)
			}
		}
		list = mine
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": list})
}

// createSession creates a session with a template before its first call.
func (h *handler) createSession(w http.ResponseWriter, r *http.Request) {
	var b api.CreateSessionBody
	if err := decode(r, &b); err != nil {
		writeErr(w, err)
		return
	}
	existed := true
	if _, err := h.e.Session(b.ID); err != nil {
		existed = false
	}
	info, err := h.e.CreateSession(r.Context(), b.ID, b.Template)
	if err != nil {
		writeErr(w, err)
		return
	}
	status := http.StatusCreated
	if existed {
		status = http.StatusOK
	}
	writeJSON(w, status, info)
}

// templates lists the templates with their effective settings.
func (h *handler) templates(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"templates": h.e.TemplateInfos()})
}

func (h *handler) session(w http.ResponseWriter, r *http.Request) {
	info, err := h.e.Session(r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (h *handler) closeSession(w http.ResponseWriter, r *http.Request) {
	if err := h.e.CloseSession(r.Context(), r.PathValue("id")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) interrupt(w http.ResponseWriter, r *http.Request) {
	if err := h.e.Interrupt(r.Context(), r.PathValue("id")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) reset(w http.ResponseWriter, r *http.Request) {
	if err := h.e.ResetSession(r.Context(), r.PathValue("id")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) health(w http.ResponseWriter, r *http.Request) {
	hl := Health{Status: "ok", Backend: h.e.Backend(), Sessions: len(h.e.Sessions())}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := h.e.Health(ctx); err != nil {
		hl.Status, hl.Problem = "degraded", err.Error()
		writeJSON(w, http.StatusServiceUnavailable, hl)
		return
	}
	writeJSON(w, http.StatusOK, hl)
}
