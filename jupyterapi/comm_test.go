package jupyterapi_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
