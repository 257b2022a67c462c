package jupyterapi

import (
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/google/uuid"
	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// kernel is a kernel started through the API: a session and its connected
// clients.
type kernel struct {
	id      string
	session string // the header "session" of the messages kernelbox sends for it

	mu      sync.Mutex
	clients map[*client]bool
	routes  map[string]route // answers to route, by kernelbox's msg_id (route.go)
	order   []string         // the routes' ids, oldest first, at most maxRoutes
}

func newKernel(id string) *kernel {
	return &kernel{id: id, session: uuid.NewString(), clients: map[*client]bool{}}
}

func (k *kernel) add(c *client) {
	k.mu.Lock()
	k.clients[c] = true
	k.mu.Unlock()
}

func (k *kernel) remove(c *client) {
	k.mu.Lock()
	delete(k.clients, c)
	k.mu.Unlock()
}

func (k *kernel) clientList() []*client {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]*client, 0, len(k.clients))
	for c := range k.clients {
		out = append(out, c)
	}
	return out
}

func (k *kernel) connections() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.clients)
}

// broadcast queues an iopub message for every client of the kernel, as Jupyter
// does: it never blocks (a client that does not read is dropped).
func (k *kernel) broadcast(frame []byte) {
	for _, c := range k.clientList() {
		c.queue(frame)
	}
}

// errNotGateway: the session exists but was not started through this API.
var errNotGateway = errors.New("not a gateway kernel")

// lookup returns kernel id and its session, or an error: api.ErrNotFound when
// there is no such session (or it has closed), errNotGateway when the session
// was not started here.
func (g *Gateway) lookup(id string) (*kernel, executor.SessionInfo, error) {
	info, err := g.e.Session(id)
	g.mu.Lock()
	defer g.mu.Unlock()
	k := g.kernels[id]
	if err != nil {
		if k != nil && errors.Is(err, api.ErrNotFound) {
			delete(g.kernels, id)
		}
		return nil, info, err
	}
	if k == nil {
		return nil, info, fmt.Errorf("session %q: %w: it was not started through /api/kernels (a session of /v1 cannot be opened from Jupyter)", id, errNotGateway)
	}
	return k, info, nil
}

// prune forgets the kernels whose sessions have gone (closed, culled), so that
// the table stays within the executor's live sessions.
func (g *Gateway) prune() {
	live := map[string]bool{}
	for _, s := range g.e.Sessions() {
		live[s.ID] = true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, k := range g.kernels {
		if !live[id] && k.connections() == 0 {
			delete(g.kernels, id)
		}
	}
}

// lookupHTTP is lookup for a route: it answers the error itself.
func (g *Gateway) lookupHTTP(w http.ResponseWriter, id string) (*kernel, executor.SessionInfo, bool) {
	k, info, err := g.lookup(id)
	if err != nil {
		if errors.Is(err, errNotGateway) || errors.Is(err, api.ErrNotFound) {
			writeError(w, http.StatusNotFound, "kernel "+quote(id)+" not found: "+err.Error())
		} else {
			writeExecError(w, err)
		}
		return nil, info, false
	}
	return k, info, true
}
