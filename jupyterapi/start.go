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
)

// StartBody is the body of POST /api/kernels.
type StartBody struct {
	// Name is the kernelspec, that is the template; "" is the default one.
	Name string `json:"name"`
	// Env is refused but for KERNEL_* variables (see checkStart).
	Env map[string]string `json:"env"`
	// Path is refused unless empty: a kernel's working directory is its session
	// directory.
	Path string `json:"path"`
}

// maxEnv bounds the variables of a start request.
const maxEnv = 256

// checkStart says what of a start request kernelbox refuses. A client's
// environment never reaches the sandbox: the kernel's environment is its
// template's. Jupyter's gateway clients send KERNEL_* variables with every start
// (KERNEL_LAUNCH_TIMEOUT, KERNEL_WORKING_DIR, KERNEL_USERNAME: hints to the
// gateway); those are accepted and ignored. Any other variable
// (LD_PRELOAD, PYTHONPATH, ...) is refused, as is a path.
func checkStart(b StartBody) error {
	if b.Path != "" {
		return fmt.Errorf("path %s: a kernelbox kernel's working directory is its own session directory; send no path", quote(b.Path))
	}
	if len(b.Env) > maxEnv {
		return fmt.Errorf("env has %d variables (at most %d)", len(b.Env), maxEnv)
	}
	var refused []string
	for k := range b.Env {
		if !strings.HasPrefix(k, "KERNEL_") {
			refused = append(refused, quote(k))
		}
	}
	if len(refused) > 0 {
		sort.Strings(refused)
		return fmt.Errorf("env %s: kernelbox does not pass a client's environment into the sandbox (only KERNEL_* gateway hints are accepted, and ignored); set a kernel's variables in its template (docs/templates.md)", strings.Join(refused, ", "))
	}
	return nil
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
	if err := checkStart(b); err != nil {
		writeError(w, http.StatusBadRequest, "start request: "+err.Error())
		return
	}
	id := uuid.NewString()
	k := newKernel(id)
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	}
	g.kernels[id] = k
	g.mu.Unlock()
	info, err := g.e.StartKernel(r.Context(), id, b.Name)
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
	g.log.Info("gateway kernel started", "session", id, "template", info.Template)
	writeJSON(w, http.StatusCreated, modelOf(k, info))
}
