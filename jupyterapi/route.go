package jupyterapi

import (
	"encoding/json"

	"github.com/kernelbox/kernelbox/jupyter"
)

// Routing the kernel's answers to what a client sent with no reply to wait
// for (comm_open, comm_msg, comm_close): kernelbox sends each under a msg_id
// of its own and remembers whose it was.

// route is where the answers to one message kernelbox sent go.
type route struct {
	c      *client
	parent json.RawMessage // the client's header: the answers' parent_header
}

// maxRoutes bounds the messages a kernel remembers answers for; the oldest is
// forgotten first (its late answers are dropped).
const maxRoutes = 1024

// route remembers that the answers to msgID go to c, with parent as their
// parent header.
func (k *kernel) route(msgID string, c *client, parent json.RawMessage) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.routes == nil {
		k.routes = map[string]route{}
	}
	if len(k.order) >= maxRoutes {
		delete(k.routes, k.order[0])
		k.order = k.order[1:]
	}
	k.routes[msgID] = route{c: c, parent: parent}
	k.order = append(k.order, msgID)
}

// answer routes a kernel message that answers no call: when it answers a
// message of a client, its iopub copy goes to every client of the kernel (as
// Jupyter's iopub does) and any other to that client, with the client's header
// as the parent. It runs on the kernel connection's reader: it never blocks.
func (k *kernel) answer(m *jupyter.Message) {
	k.mu.Lock()
	r, ok := k.routes[m.ParentHeader.MsgID]
	if ok && m.Channel == jupyter.ChannelIOPub && m.Header.MsgType == "status" {
		var st jupyter.StatusContent
		if m.DecodeContent(&st) == nil && st.ExecutionState == "idle" {
			delete(k.routes, m.ParentHeader.MsgID) // the kernel is done with it
		}
	}
	k.mu.Unlock()
	if !ok {
		return
	}
	f := relay(m, r.parent)
	if m.Channel == jupyter.ChannelIOPub {
		k.broadcast(f)
		return
	}
	r.c.queue(f)
}
