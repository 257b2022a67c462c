package jupytertest

import (
	"slices"
	"sync"

	"github.com/google/uuid"
	"github.com/kernelbox/kernelbox/jupyter"
)

// Kernel is one fake kernel: its REST state, its WebSocket connections and the
// messages buffered while no client is connected. Its methods are safe for concurrent
// use. Messages sent with the helpers reach every open connection in the order they
// were sent.
type Kernel struct {
	// ID, Name, Path and Env are fixed at creation; Path and Env are what the
	// POST /api/kernels request carried.
	ID   string
	Name string
	Path string
	Env  map[string]string

	s       *Server
	session string // the kernel's own session id, in the headers it sends

	// sendMu serializes writes to the connections (and replays on reconnect), so
	// messages keep their order. It is never held while mu is wanted by a fault
	// injection, so DropConnection does not wait behind a blocked write.
	sendMu sync.Mutex

	mu         sync.Mutex
	conns      []*wsConn
	bufSession string // while no client is connected: the session whose messages are kept
	buffer     []*jupyter.Message
	replayed   int
	sessions   []string // session_id of every accepted WebSocket, in order
	malformed  int
	state      string
	count      int
	interrupts int
	restarts   int
	refuse     int
	stall      chan struct{} // non-nil while handshakes are held; closed to release them
	handler    Handler
	gone       bool
}

func newKernel(s *Server, id, name, path string, env map[string]string) *Kernel {
	return &Kernel{ID: id, Name: name, Path: path, Env: env, s: s, session: uuid.NewString(), state: "idle"}
}

// SetHandler sets the handler for this kernel's messages, overriding
// Options.Handler; nil restores it.
func (k *Kernel) SetHandler(h Handler) {
	k.mu.Lock()
	k.handler = h
	k.mu.Unlock()
}

func (k *Kernel) handle(req *jupyter.Message) {
	k.mu.Lock()
	h := k.handler
	k.mu.Unlock()
	if h == nil {
		h = k.s.opts.Handler
	}
	if h == nil {
		h = DefaultHandler
	}
	h(k, req)
}

// Send sends m as is to every open connection. While no client is connected it is kept
// for replay to a client that reconnects with the last session_id, as Jupyter Server
// does. A write that fails loses the message, as with a real server writing to a dead
// socket.
func (k *Kernel) Send(m *jupyter.Message) {
	k.sendMu.Lock()
	defer k.sendMu.Unlock()
	k.mu.Lock()
	conns := slices.Clone(k.conns)
	if len(conns) == 0 && k.bufSession != "" {
		k.buffer = append(k.buffer, m)
	}
	k.mu.Unlock()
	for _, c := range conns {
		_ = c.write(m)
	}
}

// Raw sends one WebSocket frame as is (websocket.TextMessage or BinaryMessage) to
// every open connection, for malformed or hand-made frames. It is not buffered.
func (k *Kernel) Raw(frameType int, data []byte) {
	k.sendMu.Lock()
	defer k.sendMu.Unlock()
	k.mu.Lock()
	conns := slices.Clone(k.conns)
	k.mu.Unlock()
	for _, c := range conns {
		_ = c.writeRaw(frameType, data)
	}
}

// DropConnection closes the TCP connection of every open WebSocket abruptly, without
// a close frame, and returns how many it closed. Messages sent after it returns are
// buffered until a client connects.
func (k *Kernel) DropConnection() int {
	k.mu.Lock()
	conns := k.conns
	k.conns = nil
	if len(conns) > 0 && !k.gone {
		k.bufSession, k.buffer = conns[len(conns)-1].session, nil
	}
	k.mu.Unlock()
	for _, c := range conns {
		c.abort()
	}
	return len(conns)
}

// Refuse makes WebSocket handshakes for this kernel fail with the given HTTP status
// (404, 503, ...) until it is called with 0.
func (k *Kernel) Refuse(status int) {
	k.mu.Lock()
	k.refuse = status
	k.mu.Unlock()
}

// StallHandshakes(true) makes WebSocket handshakes for this kernel wait without an
// answer, as Jupyter Server does while it waits for a kernel's kernel_info reply,
// until StallHandshakes(false) lets them go on or the client goes away.
func (k *Kernel) StallHandshakes(on bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case on && k.stall == nil:
		k.stall = make(chan struct{})
	case !on && k.stall != nil:
		close(k.stall)
		k.stall = nil
	}
}

// SetExecutionState sets the execution_state the REST API reports, without sending
// anything. Status and KernelStatus set it too.
func (k *Kernel) SetExecutionState(state string) {
	k.mu.Lock()
	k.state = state
	k.mu.Unlock()
}

// ExecutionState returns the execution_state the REST API reports.
func (k *Kernel) ExecutionState() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.state
}

// NextExecutionCount increments and returns the kernel's execution counter.
func (k *Kernel) NextExecutionCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.count++
	return k.count
}

// ExecutionCount returns the kernel's execution counter: the count of its last
// stored execution (0 before the first, and after a restart).
func (k *Kernel) ExecutionCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.count
}

// Sessions returns the session_id of every WebSocket the kernel accepted, in order.
func (k *Kernel) Sessions() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.sessions)
}

// Connections returns how many WebSockets are open.
func (k *Kernel) Connections() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.conns)
}

// Replayed returns how many buffered messages were replayed to reconnecting clients.
func (k *Kernel) Replayed() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.replayed
}

// Malformed returns how many client frames could not be decoded.
func (k *Kernel) Malformed() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.malformed
}

// Interrupts returns how many interrupt requests the kernel received over REST.
func (k *Kernel) Interrupts() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.interrupts
}

// Restarts returns how many restart requests the kernel received over REST.
func (k *Kernel) Restarts() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.restarts
}

func (k *Kernel) stalled() chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stall
}

func (k *Kernel) refusal() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.refuse
}

// attach adds a new connection, replaying what was buffered for its session. A new
// connection for another session discards the buffer, as Jupyter Server does.
func (k *Kernel) attach(c *wsConn) bool {
	k.sendMu.Lock()
	defer k.sendMu.Unlock()
	k.mu.Lock()
	if k.gone {
		k.mu.Unlock()
		return false
	}
	k.conns = append(k.conns, c)
	k.sessions = append(k.sessions, c.session)
	var replay []*jupyter.Message
	if k.bufSession == c.session {
		replay = k.buffer
	}
	k.bufSession, k.buffer = "", nil
	k.replayed += len(replay)
	k.mu.Unlock()
	for _, m := range replay {
		_ = c.write(m)
	}
	return true
}

// detach removes a connection whose reader stopped; when it was the last one, the
// kernel starts buffering for its session.
func (k *Kernel) detach(c *wsConn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	i := slices.Index(k.conns, c)
	if i < 0 {
		return
	}
	k.conns = slices.Delete(k.conns, i, i+1)
	if len(k.conns) == 0 && !k.gone {
		k.bufSession, k.buffer = c.session, nil
	}
}

// shutdown ends the kernel: its connections are closed and no new ones are accepted.
func (k *Kernel) shutdown() {
	k.mu.Lock()
	k.gone = true
	k.state = "dead"
	conns := k.conns
	k.conns, k.bufSession, k.buffer = nil, "", nil
	k.mu.Unlock()
	for _, c := range conns {
		c.abort()
	}
}

func (k *Kernel) model() kernelModel {
	k.mu.Lock()
	defer k.mu.Unlock()
	return kernelModel{ID: k.ID, Name: k.Name, LastActivity: now(), ExecutionState: k.state, Connections: len(k.conns)}
}
