package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// agentCall prints the time five times, 50 ms apart.
const agentCall = `import time
for i in range(5):
    print("t", i, repr(time.time()), flush=True)
    time.sleep(0.05)`

// TestJupyterServerWatch: a person watches an agent's session from a real Jupyter
// Server 1.23 started with --gateway-url at a real `kernelbox serve` (local):
// the session's kernel WebSocket, opened through Jupyter Server by the session's
// id, may not run code (read-only), and receives the call the agent then runs
// through /v1 live — its code and each printed line, with the latency from the
// kernel's print to the watcher measured (testdata/gateway/watch.py). The agent's
// variables are untouched.
func TestJupyterServerWatch(t *testing.T) {
	t.Parallel() // its own serve and Jupyter Server
	py := testenv.Jupyter(t)
	testenv.Imports(t, py, "jupyter_server.gateway.managers", "websocket")
	const tok = "gw-watch-token"
	ws, data := testDirs(t)
	_, url, log := rawServeEnv(t, []string{"KERNELBOX_TOKEN=" + tok}, "--backend", "local", "--python", py, "--workspace", ws, "--workdir", data)
	jurl := startJupyterServer(t, py, "jupyter_server", url, tok)
	// Jupyter Server routes only kernel ids shaped like UUIDs.
	sid := uuid.NewString()
	s := &server{URL: url, Token: tok}
	var res struct {
		Status string `json:"status"`
	}
	s.post(t, "/v1/sessions/"+sid+"/execute", `{"code": "x = 41"}`, &res)
	require.Equal(t, "ok", res.Status)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join("testdata", "gateway", "watch.py"), jurl, sid)
	cmd.Env = append(os.Environ(), "JUPYTER_TOKEN=jtok")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var watched struct {
		Code   string  `json:"code"`
		Stdout string  `json:"stdout"`
		Lines  int     `json:"lines"`
		P50    float64 `json:"lag_p50_ms"`
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		t.Log(line)
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if f, bad := m["fail"]; bad {
			t.Fatalf("watcher: %s\nserve log:\n%s", f, log)
		}
		if _, ready := m["ready"]; ready {
			body, err := json.Marshal(map[string]string{"code": agentCall})
			require.NoError(t, err)
			s.post(t, "/v1/sessions/"+sid+"/execute", string(body), &res)
			require.Equal(t, "ok", res.Status)
		}
		if w, ok := m["watched"]; ok {
			require.NoError(t, json.Unmarshal(w, &watched))
		}
	}
	require.NoError(t, cmd.Wait(), "watcher: %s", stderr.String())
	assert.Equal(t, agentCall, watched.Code, "the agent's code, as it ran")
	assert.Equal(t, 5, watched.Lines, "every printed line: %q", watched.Stdout)
	assert.Equal(t, 5, strings.Count(watched.Stdout, "\n"))
	t.Logf("through Jupyter Server: kernel print -> watcher p50 %.1f ms (goal <= 50 ms)", watched.P50)

	var after struct {
		Stdout string `json:"stdout"`
	}
	s.post(t, "/v1/sessions/"+sid+"/execute", `{"code": "print(x + 1)"}`, &after)
	assert.Equal(t, "42\n", after.Stdout, "the watcher's refused cell changed nothing")
}
