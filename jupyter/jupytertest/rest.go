package jupytertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// routes returns the server's handler: the kernels REST API and the kernel WebSocket,
// behind token authentication.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api", s.version)
	mux.HandleFunc("GET /api/kernelspecs", s.kernelSpecs)
	mux.HandleFunc("GET /api/kernels", s.listKernels)
	mux.HandleFunc("POST /api/kernels", s.startKernel)
	mux.HandleFunc("GET /api/kernels/{id}", s.withKernel(s.getKernel))
	mux.HandleFunc("DELETE /api/kernels/{id}", s.withKernel(s.deleteKernel))
	mux.HandleFunc("POST /api/kernels/{id}/interrupt", s.withKernel(s.interrupt))
	mux.HandleFunc("POST /api/kernels/{id}/restart", s.withKernel(s.restart))
	mux.HandleFunc("GET /api/kernels/{id}/channels", s.withKernel(s.channels))
	return s.heldBySilence(s.authenticate(mux))
}

// authenticate answers 403 to requests without the configured token, as Jupyter
// Server does.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok := s.opts.Token; tok != "" &&
			r.Header.Get("Authorization") != "token "+tok && r.URL.Query().Get("token") != tok {
			writeError(w, http.StatusForbidden, "Forbidden")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// withKernel looks up the {id} of the path, answering 404 for an unknown kernel.
func (s *Server) withKernel(h func(http.ResponseWriter, *http.Request, *Kernel)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		k := s.Kernel(id)
		if k == nil {
			writeError(w, http.StatusNotFound, "Kernel does not exist: "+id)
			return
		}
		h(w, r, k)
	}
}

func (s *Server) version(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": s.opts.Version})
}

func (s *Server) kernelSpecs(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"default": "python3",
		"kernelspecs": map[string]any{
			"python3": map[string]any{
				"name": "python3",
				"spec": map[string]any{
					"argv":           []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"},
					"env":            map[string]string{},
					"display_name":   "Python 3 (fake)",
					"language":       "python",
					"interrupt_mode": "signal",
				},
				"resources": map[string]string{},
			},
		},
	})
}

func (s *Server) listKernels(w http.ResponseWriter, _ *http.Request) {
	models := []kernelModel{}
	for _, k := range s.Kernels() {
		models = append(models, k.model())
	}
	writeJSON(w, http.StatusOK, models)
}

func (s *Server) startKernel(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string            `json:"name"`
		Path string            `json:"path"`
		Env  map[string]string `json:"env"`
	}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("bad request body: %v", err))
			return
		}
	}
	k := s.addKernel(body.Name, body.Path, body.Env)
	w.Header().Set("Location", "/api/kernels/"+k.ID)
	writeJSON(w, http.StatusCreated, k.model())
}

func (s *Server) getKernel(w http.ResponseWriter, _ *http.Request, k *Kernel) {
	writeJSON(w, http.StatusOK, k.model())
}

func (s *Server) deleteKernel(w http.ResponseWriter, _ *http.Request, k *Kernel) {
	s.DeleteKernel(k.ID)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) interrupt(w http.ResponseWriter, _ *http.Request, k *Kernel) {
	k.mu.Lock()
	k.interrupts++
	k.mu.Unlock()
	if s.opts.OnInterrupt != nil {
		s.opts.OnInterrupt(k)
	}
	w.WriteHeader(http.StatusNoContent)
}

// restart models a successful restart under the same id: the execution count starts
// over. Jupyter Server sends no status message for a restart asked for over REST.
func (s *Server) restart(w http.ResponseWriter, _ *http.Request, k *Kernel) {
	k.mu.Lock()
	k.restarts++
	k.count = 0
	k.state = "idle"
	k.mu.Unlock()
	writeJSON(w, http.StatusOK, k.model())
}

// kernelModel is a kernel as the REST API describes it.
type kernelModel struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	LastActivity   string `json:"last_activity"`
	ExecutionState string `json:"execution_state"`
	Connections    int    `json:"connections"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers like Jupyter Server's APIHandler.write_error.
func writeError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]any{"message": message, "reason": nil})
}

func now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") }
