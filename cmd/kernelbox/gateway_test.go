package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/docker"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// TestJupyterServerGateway points a real Jupyter Server (Debian's 1.23, its
// --gateway-url client) at a real `kernelbox serve` and drives it through
// Jupyter Server's own REST API and kernel WebSocket, as a notebook page
// would (testdata/gateway/client.py): kernelspecs listed, a kernel of each of
// two templates started, two cells with state kept, an interrupted
// time.sleep(60), a restart, a shutdown; each kernel is a kernelbox session
// (GET /v1/sessions) while it lives.
func TestJupyterServerGateway(t *testing.T) {
	t.Parallel() // each counts only its own serve's sessions and containers (by pid)
	py := testenv.Jupyter(t)
	testJupyterGateway(t, "jupyter_server", "jupyter_server.gateway.managers", []string{"--backend", "local", "--python", py}, nil)
}

// TestNotebookGateway is TestJupyterServerGateway with Notebook 6.4
// (Debian's jupyter-notebook, `jupyter notebook --gateway-url`).
func TestNotebookGateway(t *testing.T) {
	t.Parallel() // each counts only its own serve's sessions and containers (by pid)
	py := testenv.Jupyter(t)
	testJupyterGateway(t, "notebook", "notebook.gateway.managers", []string{"--backend", "local", "--python", py}, nil)
}

// TestJupyterServerGatewayDocker is TestJupyterServerGateway on the docker
// backend: each kernel Jupyter starts is a hardened container of serve's, and
// none is left after its shutdown.
func TestJupyterServerGatewayDocker(t *testing.T) {
	// Not parallel: beside the docker adoption tests' twenty container starts on
	// the loaded 2-core machine, Jupyter's gateway client gave up on a start (599).
	testenv.Image(t, docker.DefaultImage)
	testJupyterGateway(t, "jupyter_server", "jupyter_server.gateway.managers", []string{"--backend", "docker"},
		func(t *testing.T, serve int) {
			require.Len(t, testenv.Containers(t, serve), 1, "the kernel's container")
		})
}

// testJupyterGateway runs the gateway client test with `python -m module`
// as the Jupyter server (gateway is its gateway client's module) and serve
// started with backend's flags; live, if set, checks the serve process (its
// pid) while a kernel lives.
func testJupyterGateway(t *testing.T, module, gateway string, backend []string, live func(t *testing.T, serve int)) {
	py := testenv.Jupyter(t)
	testenv.Imports(t, py, gateway, "websocket")
	const tok = "gw-test-token"
	ws, data := testDirs(t)
	tmpl := filepath.Join(t.TempDir(), "templates.json")
	require.NoError(t, os.WriteFile(tmpl, []byte(`{"templates": [
		{"name": "analyst", "description": "x preset", "preload": ["preset = 7"]}]}`), 0o600))
	// serve reads its token from the environment: no token in a command line
	serve, url, log := rawServeEnv(t, []string{"KERNELBOX_TOKEN=" + tok}, append(backend, "--workspace", ws, "--workdir", data, "--templates", tmpl)...)

	jurl := startJupyterServer(t, py, module, url, tok)
	for _, template := range []string{"default", "analyst"} {
		t.Run(template, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, py, filepath.Join("testdata", "gateway", "client.py"), jurl)
			cmd.Env = append(os.Environ(), "JUPYTER_TOKEN=jtok", "TEMPLATE="+template, "PAUSE_BEFORE_SHUTDOWN=1")
			stdin, err := cmd.StdinPipe()
			require.NoError(t, err)
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			stderr := &lockedBuffer{}
			cmd.Stderr = stderr
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			sc := bufio.NewScanner(out)
			var ok bool
			for sc.Scan() {
				line := sc.Text()
				t.Log(line)
				var m map[string]any
				require.NoError(t, json.Unmarshal([]byte(line), &m), line)
				if f, bad := m["fail"]; bad {
					t.Fatalf("client: %v\nserve log:\n%s", f, log)
				}
				if kid, isKernel := m["kernel"].(string); isKernel {
					// The kernel is a kernelbox session of that template.
					sessions := getJSON(t, url+"/v1/sessions", tok)
					require.Contains(t, sessions, `"id":"`+kid+`"`)
					require.Contains(t, sessions, `"template":"`+template+`"`)
					if live != nil {
						live(t, serve.Process.Pid)
					}
					_, err := io.WriteString(stdin, "\n")
					require.NoError(t, err)
				}
				ok = ok || m["ok"] == true
			}
			require.NoError(t, cmd.Wait(), "client: %s", stderr.String())
			require.True(t, ok, "the client did not finish")
		})
	}
	require.JSONEq(t, `{"sessions":[]}`, getJSON(t, url+"/v1/sessions", tok), "every kernel was shut down")
	if live != nil {
		require.Eventually(t, func() bool { return len(testenv.Containers(t, serve.Process.Pid)) == 0 }, 30*time.Second, 200*time.Millisecond,
			"a container outlived its kernel's shutdown")
	}
}

// startJupyterServer starts Jupyter Server (module jupyter_server) or
// Notebook (module notebook) with --gateway-url at kernelbox (its token in the
// environment) and returns its URL; its own token is "jtok".
func startJupyterServer(t *testing.T, py, module, gateway, tok string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	dir := t.TempDir()
	root := "--ServerApp.root_dir="
	if module == "notebook" {
		root = "--notebook-dir="
	}
	args := []string{"-m", module, "--no-browser", "--ip=127.0.0.1", "--port=" + strconv.Itoa(port),
		"--gateway-url=" + gateway, root + dir}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-root")
	}
	cmd := exec.Command(py, args...)
	cmd.Env = append(os.Environ(), "JUPYTER_GATEWAY_AUTH_TOKEN="+tok, "JUPYTER_TOKEN=jtok",
		"JUPYTER_CONFIG_DIR="+filepath.Join(dir, ".config"), "JUPYTER_RUNTIME_DIR="+filepath.Join(dir, ".runtime"),
		"JUPYTER_DATA_DIR="+filepath.Join(dir, ".data"))
	jlog := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = jlog, jlog
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("jupyter server log:\n%s", jlog)
		}
	})
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	require.Eventually(t, func() bool {
		resp, err := http.Get(url + "/api")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, time.Minute, 100*time.Millisecond, "jupyter server did not start:\n%s", jlog)
	return url
}

// getJSON GETs url with kernelbox's token and returns the body.
func getJSON(t *testing.T, url, tok string) string {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	return string(b)
}
