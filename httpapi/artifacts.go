package httpapi

import (
	"github.com/kernelbox/kernelbox/api"

	"io"
	"mime"
	"net/http"
	"path"
	"strconv"

	"github.com/kernelbox/kernelbox/workspace"
)

func (h *handler) artifacts(w http.ResponseWriter, r *http.Request) {
	if h.o.Workspace == nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "artifacts are not served")
		return
	}
	id := r.PathValue("id")
	if !api.ValidSessionID(id) {
		writeError(w, http.StatusBadRequest, api.CodeInvalidRequest, "invalid session id")
		return
	}
	arts, err := h.o.Workspace.Artifacts(id)
	if err != nil {
		writeErr(w, err)
		return
	}
	if arts == nil {
		arts = []workspace.Artifact{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"session_id": id, "artifacts": arts})
}

func (h *handler) artifact(w http.ResponseWriter, r *http.Request) {
	if h.o.Workspace == nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "artifacts are not served")
		return
	}
	sess, name := r.PathValue("session"), r.PathValue("path")
	f, err := h.o.Workspace.OpenArtifact(sess, name)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		writeErr(w, err)
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	// Artifacts are written by untrusted code: never let a browser render them as
	// part of this origin, nor let one that does render load or run anything.
	w.Header().Set("Content-Security-Policy", "sandbox; default-src 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(name)}))
	_, _ = io.Copy(w, f)
}
