package httpapi

import (
	"net/http"

	"github.com/kernelbox/kernelbox/api"
)

// durableRoutes are the hibernate, resume and fork routes (executor/durable.go).
func (h *handler) durableRoutes() []row {
	return []row{
		{Route{Pattern: "POST /v1/sessions/{id}/hibernate", JSON: true, Scoped: true, Ops: opHibernate, Target: PathID}, h.hibernate},
		{Route{Pattern: "POST /v1/sessions/{id}/resume", JSON: true, Scoped: true, Ops: opHibernate, Target: PathID}, h.resume},
		// The new session's id must be in the token's reach too (claimed).
		{Route{Pattern: "POST /v1/sessions/{id}/fork", JSON: true, Scoped: true, Ops: opFork, Target: PathID, Creates: CreatesBodyID}, h.fork},
	}
}

// hibernate answers the session as it is after the attempt: hibernated, or an
// error (cannot_hibernate, snapshot_too_large) with the session left live.
func (h *handler) hibernate(w http.ResponseWriter, r *http.Request) {
	info, err := h.e.Hibernate(r.Context(), r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (h *handler) resume(w http.ResponseWriter, r *http.Request) {
	res, err := h.e.Resume(r.Context(), r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (h *handler) fork(w http.ResponseWriter, r *http.Request) {
	var b api.ForkRequest
	if err := decode(r, &b); err != nil {
		writeErr(w, err)
		return
	}
	res, err := h.e.Fork(r.Context(), r.PathValue("id"), b.ID)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, res)
}
