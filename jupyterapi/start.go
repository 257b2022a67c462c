package jupyterapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/kernelbox/kernelbox/api"
)

// StartBody is the body of POST /api/kernels.
type StartBody struct {
	// Name is the kernelspec: a template, or a Jupyter kernel name that chooses
	// one (api.TemplateForKernel: "python3", "ir", a template's kernel_names);
	// "" is the default template.
	Name string `json:"name"`
	// Env is read and ignored: see checkStart.
	Env map[string]string `json:"env"`
	// Path is refused unless empty: a kernel's working directory is its session
	// directory.
	Path string `json:"path"`
}

// maxEnv bounds the variables of a start request.
const maxEnv = 1024

// checkStart says what of a start request kernelbox refuses, and returns the
// names of the env variables it ignores. A client's environment never reaches
// the sandbox: a kernel's environment is its template's. It is ignored rather
// than refused because Jupyter's own clients send one with every start:
// KERNEL_* gateway hints (KERNEL_LAUNCH_TIMEOUT, KERNEL_WORKING_DIR), and,
// from Jupyter Server 1.23's sessions API (every notebook opened), the
// server's whole process environment, its tokens included. A path is refused.
func checkStart(b StartBody) ([]string, error) {
	if b.Path != "" {
		return nil, fmt.Errorf("path %s: a kernelbox kernel's working directory is its own session directory; send no path", quote(b.Path))
	}
	if len(b.Env) > maxEnv {
		return nil, fmt.Errorf("env has %d variables (at most %d)", len(b.Env), maxEnv)
	}
	names := make([]string, 0, len(b.Env))
	for k := range b.Env {
		names = append(names, quote(k))
	}
	sort.Strings(names)
	return names, nil
}

func (g *Gateway) startKernel(w http.ResponseWriter, r *http.Request) {
	var b StartBody
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil && !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "start request over the body limit")
			return
		}
		writeError(w, http.StatusBadRequest, "start request: "+err.Error())
		return
	}
	ignored, err := checkStart(b)
	if err != nil {
		writeError(w, http.StatusBadRequest, "start request: "+err.Error())
		return
	}
	id := uuid.NewString()
	k := newKernel(id)
	tmpl := b.Name
	if t, ok := api.TemplateForKernel(g.e.TemplateInfos(), b.Name); ok && b.Name != "" {
		tmpl, k.name = t, b.Name
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	}
	g.kernels[id] = k
	g.mu.Unlock()
	info, err := g.e.StartKernel(r.Context(), id, tmpl)
	if err != nil {
		g.mu.Lock()
		delete(g.kernels, id)
		g.mu.Unlock()
		// A session made before its kernel failed is closed: a failed start
		// leaves nothing behind.
		_ = g.e.CloseSession(r.Context(), id)
		writeExecError(w, fmt.Errorf("start kernel %q: %w", b.Name, err))
		return
	}
	if len(ignored) > 0 {
		// Names only: the values may be secrets (Jupyter Server sends its own
		// environment).
		if len(ignored) > 20 {
			ignored = append(ignored[:20], fmt.Sprintf("and %d more", len(ignored)-20))
		}
		g.log.Info("gateway kernel start: the request's env is ignored (a kernel's environment is its template's)",
			"session", id, "vars", strings.Join(ignored, ", "))
	}
	g.log.Info("gateway kernel started", "session", id, "template", info.Template)
	writeJSON(w, http.StatusCreated, modelOf(k, info))
}
