package httpapi

import (
	"net/http"
	"strings"

	"github.com/kernelbox/kernelbox/api"
)

// match finds r's row of the route table, or nil, and the request to serve.
//
// http.ServeMux cleans a path before it matches it, and redirects "a/../b" to
// "b"; the files routes (AsSent) must see the path as sent to refuse it
// (invalid_path). So r is matched as sent (see asSent); when its path is not
// clean and the row it matches is not AsSent, it is served as no route, which
// the mux redirects to the clean path as before.
func (h *handler) match(r *http.Request) (*row, *http.Request) {
	sent := asSent(r)
	_, pattern := h.mux.Handler(sent)
	rt := h.rows[pattern]
	if sent != r && (rt == nil || !rt.AsSent) {
		return nil, r
	}
	return rt, sent
}

// asSent returns r with its path escaped so that the mux, which cleans paths,
// sees it clean and matches it segment by segment as sent: a "." or ".."
// segment becomes "%2E" or "%2E%2E", and the slash of an empty segment ("//")
// joins the next segment as "%2F". Path values are unescaped by the mux, so a
// handler reads the segments as sent ("../x", "/etc"). It returns r itself when
// its path is already clean.
func asSent(r *http.Request) *http.Request {
	p := r.URL.EscapedPath()
	if !strings.HasPrefix(p, "/") || clean(p) {
		return r
	}
	segs := strings.Split(p[1:], "/")
	var b strings.Builder
	carry := "" // the escaped slashes of empty segments, for the next segment
	for i, s := range segs {
		switch {
		case s == "" && i < len(segs)-1:
			carry += "%2F"
			continue
		case s == "." || s == "..":
			s = strings.ReplaceAll(s, ".", "%2E")
		}
		b.WriteString("/" + carry + s)
		carry = ""
	}
	r2 := r.WithContext(r.Context()) // a shallow copy
	u := *r.URL
	u.RawPath = b.String()
	r2.URL = &u
	return r2
}

// clean reports whether an escaped path has no "." or ".." segment and no
// empty one but the last (a trailing slash): the paths the mux leaves alone.
func clean(p string) bool {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range segs {
		if s == "." || s == ".." || (s == "" && i < len(segs)-1) {
			return false
		}
	}
	return true
}

// noRoute answers a request that matches no row, after the guard: a path that
// is not clean is redirected by the mux to its clean form; otherwise the mux's
// answer (405 with Allow when the path has routes for other methods, else 404)
// is sent as an ErrorBody, like every other error.
func (h *handler) noRoute(w http.ResponseWriter, r *http.Request) {
	if !clean(r.URL.EscapedPath()) {
		h.mux.ServeHTTP(w, r)
		return
	}
	var ans muxAnswer
	h.mux.ServeHTTP(&ans, r)
	what := r.Method + " " + clip(r.URL.Path)
	if allow := ans.header.Get("Allow"); ans.status == http.StatusMethodNotAllowed && allow != "" {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, api.CodeInvalidRequest, what+": the path takes "+allow)
		return
	}
	writeError(w, http.StatusNotFound, api.CodeNotFound, what+": no such route")
}

// muxAnswer keeps the status and headers of the mux's answer to a request
// that matches no route, and drops its plain-text body.
type muxAnswer struct {
	header http.Header
	status int
}

func (a *muxAnswer) Header() http.Header {
	if a.header == nil {
		a.header = http.Header{}
	}
	return a.header
}

func (a *muxAnswer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *muxAnswer) Write(b []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	return len(b), nil
}

// clip shortens a path from a client for an error message.
func clip(p string) string {
	if len(p) > 200 {
		return p[:200] + "..."
	}
	return p
}
