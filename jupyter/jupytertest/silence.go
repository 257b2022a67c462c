package jupytertest

import "net/http"

// Silence(true) makes the server answer no HTTP request (the REST API and WebSocket
// handshakes) until Silence(false) or the client goes away, as a Jupyter Server
// stopped with SIGSTOP would. Open WebSockets are not affected: give their kernels a
// handler that answers nothing ([Stall]) for that. Close ends the silence.
func (s *Server) Silence(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case on && s.silent == nil:
		s.silent = make(chan struct{})
	case !on && s.silent != nil:
		close(s.silent)
		s.silent = nil
	}
}

// heldBySilence wraps next so that requests wait out a Silence.
func (s *Server) heldBySilence(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		silent := s.silent
		s.mu.Unlock()
		if silent != nil {
			select {
			case <-silent:
			case <-r.Context().Done():
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
