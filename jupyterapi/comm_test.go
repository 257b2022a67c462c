package jupyterapi_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/jupyterapi"
)

// TestComm: a comm_open reaches the kernel's comm target, and the comm_msg the
// kernel sends back in answer reaches the client with the client's
// comm_open header as its parent.
func TestComm(t *testing.T) {
	s := newGW(t, jupyterapi.Options{}, nil)
	c := s.mustDial(s.start("default"))
	x := c.execute(`def _echo(comm, msg):
    comm.send({"echo": msg["content"]["data"]["x"] * 2})
get_ipython().kernel.comm_manager.register_target("echo", _echo)`)
	rep, _ := c.until(x, "execute_reply")
	require.Equal(t, "ok", rep.text("status"))

	open := c.send("shell", "comm_open", map[string]any{"comm_id": "c1", "target_name": "echo", "data": map[string]any{"x": 21}})
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := c.read(time.Until(deadline))
		require.NoError(t, err, "no comm_msg in answer")
		if m.MsgType == "comm_msg" {
			assert.Equal(t, open, m.parent())
			assert.Equal(t, "iopub", m.Channel)
			assert.JSONEq(t, `{"echo": 42}`, string(mustField(t, m, "data")))
			break
		}
	}
}

func mustField(t *testing.T, m msg, field string) []byte {
	t.Helper()
	var c map[string]any
	require.NoError(t, json.Unmarshal(m.Content, &c))
	b, err := json.Marshal(c[field])
	require.NoError(t, err)
	return b
}

// widgetCode opens a comm from the kernel and sends on it, as a widget does
// when a cell displays it.
const widgetCode = `from ipykernel.comm import Comm
w = Comm(target_name="jupyter.widget", data={"state": {"value": 1}})
w.send({"method": "update", "state": {"value": 2}})
print("shown")`

// TestCellComm: the comm messages a cell sends (a widget it displays) reach the
// kernel's clients during the call, with the execute_request as their parent,
// as Jupyter sends them; a client's comm_msg on that comm reaches the kernel
// (the comm's handler answers). An agent's call that opens one reaches its
// watchers too, and the call's Result holds no comm message.
func TestCellComm(t *testing.T) {
	s := newGW(t, jupyterapi.Options{}, nil)
	id := s.start("default")
	c := s.mustDial(id)
	x := c.execute(widgetCode + "\nw.on_msg(lambda m: w.send({'echo': m['content']['data']['n'] * 2}))")
	rep, iopub := c.until(x, "execute_reply")
	require.Equal(t, "ok", rep.text("status"), string(rep.Content))
	var types []string
	var commID string
	for _, m := range iopub {
		types = append(types, m.MsgType)
		if m.MsgType == "comm_open" {
			commID = m.text("comm_id")
			assert.Equal(t, "jupyter.widget", m.text("target_name"))
			assert.JSONEq(t, `{"state": {"value": 1}}`, string(mustField(t, m, "data")))
		}
	}
	assert.Equal(t, "execute_input", types[0], "%v", types)
	assert.Less(t, slices.Index(types, "comm_open"), slices.Index(types, "comm_msg"), "%v", types)
	assert.Contains(t, types, "stream")
	require.NotEmpty(t, commID)

	// The frontend talks back on the comm; the kernel's answer comes back.
	back := c.send("shell", "comm_msg", map[string]any{"comm_id": commID, "data": map[string]any{"n": 21}})
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := c.read(time.Until(deadline))
		require.NoError(t, err, "no answer on the comm")
		if m.MsgType == "comm_msg" && m.parent() == back {
			assert.JSONEq(t, `{"echo": 42}`, string(mustField(t, m, "data")))
			break
		}
	}

	// An agent's call: its watchers see the comm; its Result has only the print.
	r, err := s.e.Execute(context.Background(), api.Request{SessionID: id, Code: widgetCode})
	require.NoError(t, err)
	assert.Equal(t, "shown\n", r.Stdout)
	require.Len(t, r.Outputs, 1, "no comm message among the outputs")
	var seen []string
	for len(seen) < 2 {
		m, err := c.read(30 * time.Second)
		require.NoError(t, err, "the watcher's comm messages (saw %v)", seen)
		if m.MsgType == "comm_open" || m.MsgType == "comm_msg" {
			seen = append(seen, m.MsgType)
		}
	}
	assert.Equal(t, []string{"comm_open", "comm_msg"}, seen)
}
