package jupyterapi

import (
	"errors"
	"net/http"
	"sync"

	"github.com/google/uuid"

	"github.com/kernelbox/kernelbox/api"
)

// kernel is a session served as a Jupyter kernel: one started through the API,
// or an agent's session a client opened to watch (agent), and its clients.
type kernel struct {
	id      string
	session string // the header "session" of the messages kernelbox sends for it
	agent   bool   // not started through this API (watch.go)
	name    string // the kernelspec name the start request asked for ("": the template's)

	mu        sync.Mutex
	clients   map[*client]bool
	stopWatch func()           // ends the session's watch while clients are attached (watch.go)
	routes    map[string]route // answers to route, by kernelbox's msg_id (route.go)
	order     []string         // the routes' ids, oldest first, at most maxRoutes
}

func newKernel(id string) *kernel {
	return &kernel{id: id, session: uuid.NewString(), clients: map[*client]bool{}}
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
func (k *kernel) broadcast(f *outFrame) {
	for _, c := range k.clientList() {
		c.queue(f)
	}
}

// lookup returns kernel id and its session, or api.ErrNotFound when there is no
// such session (or it has closed). A session not started through this API (an
// agent's) is served too, for watching (watch.go).
func (g *Gateway) lookup(id string) (*kernel, api.SessionInfo, error) {
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
		k = newKernel(id)
		k.agent = true
		g.kernels[id] = k
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
func (g *Gateway) lookupHTTP(w http.ResponseWriter, id string) (*kernel, api.SessionInfo, bool) {
	k, info, err := g.lookup(id)
	if err != nil {
		if errors.Is(err, api.ErrNotFound) {
			writeError(w, http.StatusNotFound, "kernel "+quote(id)+" not found: "+err.Error())
		} else {
			writeExecError(w, err)
		}
		return nil, info, false
	}
	return k, info, true
}
