package mcpserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/mcpserver"
)

// TestStartAndGetCall: start_code answers at once; get_call shows the output so
// far, then the result as execute_code renders it.
func TestStartAndGetCall(t *testing.T) {
	e := newEnv(t)
	reg := calls.New(e.E, calls.Options{MaxCalls: 1})
	t.Cleanup(func() { require.NoError(t, reg.Close()) })
	cs := e.client(t, mcpserver.Options{Calls: reg, MaxTextBytes: 2000})

	res := call(t, cs, "start_code", map[string]any{"code": "import time\nprint('begin', flush=True)\ntime.sleep(3)\nprint('x' * 5000)\n6 * 7", "session_id": "mcpcall"})
	require.False(t, res.IsError, textOf(res))
	st := structured(t, res)
	id, _ := st["call_id"].(string)
	require.NotEmpty(t, id)
	assert.Equal(t, "mcpcall", st["session_id"])
	assert.Contains(t, textOf(res), id)

	res = call(t, cs, "get_call", map[string]any{"call_id": id})
	require.False(t, res.IsError, textOf(res))
	g := structured(t, res)
	assert.Contains(t, []any{"queued", "running"}, g["state"])
	assert.Nil(t, g["result"])

	res = call(t, cs, "get_call", map[string]any{"call_id": id, "wait_seconds": 120})
	require.False(t, res.IsError, textOf(res))
	g = structured(t, res)
	assert.Equal(t, "done", g["state"])
	r, ok := g["result"].(map[string]any)
	require.True(t, ok, "%v", g)
	assert.Equal(t, "ok", r["status"])
	assert.Equal(t, "42", r["result"])
	assert.Equal(t, true, r["truncated"], "the text budget applies as in execute_code")
	txt := textOf(res)
	assert.Contains(t, txt, "done")
	assert.Contains(t, txt, "begin")
	assert.Less(t, len(txt), 4000)

	// Another call pushes the first out of a registry that keeps one.
	res = call(t, cs, "start_code", map[string]any{"code": "1", "session_id": "mcpcall"})
	id2, _ := structured(t, res)["call_id"].(string)
	res = call(t, cs, "get_call", map[string]any{"call_id": id2, "wait_seconds": 60})
	require.False(t, res.IsError, textOf(res))
	res = call(t, cs, "get_call", map[string]any{"call_id": id})
	require.True(t, res.IsError)
	assert.Contains(t, textOf(res), "expired")

	for name, args := range map[string]map[string]any{
		"unknown call":  {"call_id": "nope"},
		"no call id":    {},
		"negative wait": {"call_id": id2, "wait_seconds": -1},
	} {
		res := call(t, cs, "get_call", args)
		assert.True(t, res.IsError, "%s: %s", name, textOf(res))
	}
	for name, args := range map[string]map[string]any{
		"bad session":  {"code": "1", "session_id": "../x"},
		"empty code":   {"code": ""},
		"bad timeout":  {"code": "1", "timeout_seconds": 1e9},
		"bad max wait": {"code": "1", "max_wait_seconds": -1},
	} {
		res := call(t, cs, "start_code", args)
		assert.True(t, res.IsError, "%s: %s", name, textOf(res))
	}
}
