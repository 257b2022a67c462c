package jupyterapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/jupyterapi"
)

// watchCode prints the time 30 times, 50 ms apart, then raises.
const watchCode = `import time
for i in range(30):
    print("t", i, repr(time.time()), flush=True)
    time.sleep(0.05)
raise ValueError("agent's error")`

// TestWatchAgent opens an agent's /v1 session from a Jupyter client: every call
// the agent runs reaches the watcher live (busy, execute_input with its code,
// each line as it is printed, the error, idle), with the latency from the kernel's
// print to the watcher measured; the watcher may ask kernel_info but not run code,
// interrupt or shut the session down; when the agent closes the session the
// watcher is told. A server with AllowTyping lets a client run code in it.
func TestWatchAgent(t *testing.T) {
	t.Parallel()
	s := newGW(t, jupyterapi.Options{}, nil)
	ctx := context.Background()
	const id = "agent-watched"
	r, err := s.e.Execute(ctx, api.Request{SessionID: id, Code: "x = 41"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status)

	w := s.mustDial(id)
	info := w.send("shell", "kernel_info_request", map[string]any{})
	reply, _ := w.until(info, "kernel_info_reply")
	assert.Equal(t, "ok", reply.text("status"))
	for _, req := range [][2]string{{"shell", "execute_request"}, {"control", "interrupt_request"}, {"control", "shutdown_request"}, {"shell", "complete_request"}} {
		rid := w.send(req[0], req[1], map[string]any{"code": "x = 0", "cursor_pos": 1})
		reply, _ := w.until(rid, strings.TrimSuffix(req[1], "_request")+"_reply")
		assert.Equal(t, "error", reply.text("status"), req[1])
		assert.Equal(t, "ReadOnly", reply.text("ename"), req[1])
	}

	// The agent runs a call; the watcher sees it as it runs.
	done := make(chan *api.Result, 1)
	go func() {
		r, _ := s.e.Execute(ctx, api.Request{SessionID: id, Code: watchCode})
		done <- r
	}()
	var types []string
	var lags []time.Duration
	var code string
	var parent string
	for {
		m, err := w.read(time.Minute)
		require.NoError(t, err, "reading the watched call")
		if m.Channel != "iopub" || !strings.HasPrefix(m.parent(), "kernelbox-call-") {
			continue // the answers to the refused requests above
		}
		if parent == "" {
			parent = m.parent()
		}
		require.Equal(t, parent, m.parent(), "one call, one parent")
		types = append(types, m.MsgType)
		switch m.MsgType {
		case "execute_input":
			code = m.text("code")
		case "stream":
			for _, line := range strings.Split(strings.TrimSpace(m.text("text")), "\n") {
				f := strings.Fields(line)
				if len(f) == 3 {
					if sec, err := strconv.ParseFloat(f[2], 64); err == nil {
						lags = append(lags, time.Since(time.UnixMicro(int64(sec*1e6))))
					}
				}
			}
		}
		if m.MsgType == "status" && m.text("execution_state") == "idle" {
			break
		}
	}
	res := <-done
	require.NotNil(t, res)
	assert.Equal(t, watchCode, code)
	assert.Equal(t, []string{"status", "execute_input"}, types[:2])
	assert.Contains(t, types, "error")
	assert.Contains(t, parent, "kernelbox-call-"+id)
	require.Len(t, lags, 30, "every printed line reached the watcher")
	slices.Sort(lags)
	p50, p90 := lags[len(lags)/2], lags[len(lags)*9/10]
	t.Logf("kernel print -> watcher: p50 %s, p90 %s, max %s (goal p50 <= 50 ms)", p50, p90, lags[len(lags)-1])
	assert.Less(t, p50, time.Second, "a watcher sees output as it is printed, not at the call's end")

	// The variables are the agent's: a watcher's execute_request changed nothing.
	r, err = s.e.Execute(ctx, api.Request{SessionID: id, Code: "print(x + 1)"})
	require.NoError(t, err)
	assert.Equal(t, "42\n", r.Stdout)

	// The agent closes its session: the watcher is told.
	st, _ := s.do("DELETE", "/v1/sessions/"+id, "")
	require.Equal(t, http.StatusNoContent, st)
	code1, reason := w.closeCode(30 * time.Second)
	assert.Equal(t, 1000, code1)
	assert.Contains(t, reason, "closed")
}

// TestWatchAllowTyping: with AllowTyping a Jupyter client runs code in an agent's
// session, and the agent finds its variable.
func TestWatchAllowTyping(t *testing.T) {
	t.Parallel()
	s := newGW(t, jupyterapi.Options{AllowTyping: true}, nil)
	const id = "agent-typed"
	_, err := s.e.CreateSession(context.Background(), id, "")
	require.NoError(t, err)
	w := s.mustDial(id)
	reply, _ := w.until(w.execute("y = 6 * 7"), "execute_reply")
	require.Equal(t, "ok", reply.text("status"), string(reply.Content))
	r, err := s.e.Execute(context.Background(), api.Request{SessionID: id, Code: "print(y)"})
	require.NoError(t, err)
	assert.Equal(t, "42\n", r.Stdout)
	var k jupyterapi.Kernel
	st, b := s.do("GET", "/api/kernels/"+id, "")
	require.Equal(t, http.StatusOK, st)
	require.NoError(t, json.Unmarshal(b, &k))
	assert.Equal(t, 1, k.Connections, fmt.Sprintf("%+v", k))
}
