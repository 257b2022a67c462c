// Package jupytertest provides an in-process fake of the kernel gateway protocol — the
// REST + WebSocket API of Jupyter Server — for protocol edge-case tests of package
// jupyter and its users.
//
// Start reading at [New] and [Options]. The fake serves the kernels REST API and the
// kernel WebSocket in both framings (legacy JSON and v1 binary). It has no kernels of
// its own: each client message is handed to a [Handler] the test supplies, which
// answers with the helpers on [Kernel] ([Kernel.Reply], [Kernel.Status],
// [Kernel.Stream], [Kernel.Result], ...); [DefaultHandler] behaves like a tiny kernel.
// Faults are injected with [Kernel.DropConnection], [Kernel.Refuse],
// [Kernel.KernelStatus], [Kernel.Raw] and [Kernel.SendForeign]. Like Jupyter Server,
// the fake buffers what a kernel sends while no client is connected and replays it to
// a client that reconnects with the same session_id.
//
// A Server is closed by the cleanup New registers; every goroutine it started has
// exited when Close returns.
package jupytertest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/kernelbox/kernelbox/jupyter"
)

// Options configures a Server. The zero value works.
type Options struct {
	// Token, when set, must accompany every request, as "Authorization: token <Token>"
	// or a token query parameter; other requests get 403. Defaults to no
	// authentication.
	Token string

	// LegacyOnly makes the server ignore an offered v1 subprotocol, like servers
	// older than Jupyter Server 1.19. Defaults to selecting v1 when the client offers
	// it.
	LegacyOnly bool

	// Socket makes the server listen on a unix socket as well as on TCP; see
	// [Server.SocketEndpoint]. Defaults to TCP only.
	Socket bool

	// Handler answers client messages for kernels that have no handler of their own
	// (see [Kernel.SetHandler]). Defaults to [DefaultHandler].
	Handler Handler

	// OnInterrupt, when set, is called for each POST /api/kernels/{id}/interrupt after
	// it is recorded and before it is answered.
	OnInterrupt func(k *Kernel)

	// Version is what GET /api reports. Defaults to "1.23.2".
	Version string
}

// Handler answers one client message. It is called from the reader goroutine of the
// WebSocket the message arrived on, one message at a time per connection, and must
// return promptly: a handler that blocks holds up that connection and Server.Close.
// To answer later, hand the message to the test goroutine over a channel.
type Handler func(k *Kernel, req *jupyter.Message)

// Server is a fake Jupyter Server. Its methods are safe for concurrent use.
type Server struct {
	opts Options
	ts   *httptest.Server

	sockDir string
	unix    *http.Server

	mu      sync.Mutex
	kernels map[string]*Kernel
	closed  bool
	silent  chan struct{}  // closed when a Silence ends; nil: not silent
	wg      sync.WaitGroup // WebSocket reader goroutines and the unix server
}

// New starts a fake server and registers t.Cleanup to close it. opts may be nil.
func New(t testing.TB, opts *Options) *Server {
	t.Helper()
	s := &Server{kernels: make(map[string]*Kernel)}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Version == "" {
		s.opts.Version = "1.23.2"
	}
	s.ts = httptest.NewServer(s.routes())
	if s.opts.Socket {
		if err := s.listenUnix(); err != nil {
			s.Close()
			t.Fatalf("jupytertest: %v", err)
		}
	}
	// Registered once s is whole: a warm pool may start a server from its own
	// goroutine while the test's cleanups run, and a cleanup registered then runs
	// at once, in the test's goroutine (it raced with the writes above).
	t.Cleanup(s.Close)
	return s
}

// listenUnix serves the routes on a unix socket in a new temporary directory too.
func (s *Server) listenUnix() error {
	// t.TempDir paths can exceed the 108-byte limit of a socket address.
	dir, err := os.MkdirTemp("", "jupytertest")
	if err != nil {
		return err
	}
	s.sockDir = dir
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		return err
	}
	s.unix = &http.Server{Handler: s.routes()}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.unix.Serve(ln)
	}()
	return nil
}

// Endpoint returns the server's TCP endpoint, with the token if one is configured.
func (s *Server) Endpoint() jupyter.Endpoint {
	return jupyter.Endpoint{URL: s.ts.URL, Token: s.opts.Token}
}

// SocketEndpoint returns the server's unix socket endpoint. It panics unless
// Options.Socket was set.
func (s *Server) SocketEndpoint() jupyter.Endpoint {
	if s.sockDir == "" {
		panic("jupytertest: SocketEndpoint without Options.Socket")
	}
	return jupyter.Endpoint{Socket: filepath.Join(s.sockDir, "s"), Token: s.opts.Token}
}

// AddKernel creates a kernel as POST /api/kernels does, without a request.
func (s *Server) AddKernel(name string) *Kernel {
	return s.addKernel(name, "", nil)
}

func (s *Server) addKernel(name, path string, env map[string]string) *Kernel {
	if name == "" {
		name = "python3"
	}
	k := newKernel(s, uuid.NewString(), name, path, env)
	s.mu.Lock()
	s.kernels[k.ID] = k
	s.mu.Unlock()
	return k
}

// Kernel returns the kernel with the given id, or nil.
func (s *Server) Kernel(id string) *Kernel {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kernels[id]
}

// Kernels returns the running kernels, ordered by id.
func (s *Server) Kernels() []*Kernel {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := make([]*Kernel, 0, len(s.kernels))
	for _, k := range s.kernels {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].ID < ks[j].ID })
	return ks
}

// DeleteKernel removes a kernel as DELETE /api/kernels/{id} does: its WebSockets are
// closed without a close frame and later requests for it get 404. It reports whether
// the kernel existed.
func (s *Server) DeleteKernel(id string) bool {
	s.mu.Lock()
	k := s.kernels[id]
	delete(s.kernels, id)
	s.mu.Unlock()
	if k == nil {
		return false
	}
	k.shutdown()
	return true
}

// Close closes every connection and waits for the server's goroutines to exit. It is
// idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.Silence(false)
	// Stop taking requests first; hijacked WebSockets are closed with their kernels.
	if s.ts != nil {
		s.ts.Close()
	}
	if s.unix != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.unix.Shutdown(ctx)
		cancel()
		_ = s.unix.Close()
	}
	for _, k := range s.Kernels() {
		k.shutdown()
	}
	s.wg.Wait()
	if s.sockDir != "" {
		_ = os.RemoveAll(s.sockDir)
	}
}

// track registers a goroutine the server must wait for; it fails once the server is
// closed, so that no goroutine starts after Close began waiting.
func (s *Server) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}
