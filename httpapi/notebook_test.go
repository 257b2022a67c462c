package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// notebookServer serves an executor (on the local backend when local is set, else
// with execution disabled) over httptest.
func notebookServer(t *testing.T, local bool, o httpapi.Options) *httptest.Server {
	t.Helper()
	root := t.TempDir()
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(root, "ws")})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	opts := executor.Options{
		Workspace: ws,
		Permissions: &permissions.Engine{
			Policy: permissions.DefaultPolicy(),
			Vars:   permissions.Vars{Workdir: root, Home: filepath.Join(root, "home"), Artifacts: ws.ArtifactsDir()},
		},
		InterruptGrace: 2 * time.Second,
	}
	if local {
		opts.Backend = testexec.LocalBackend(t)
	}
	e, err := executor.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	o.Workspace = ws
	srv := httptest.NewServer(httpapi.New(e, o))
	t.Cleanup(srv.Close)
	return srv
}

func postNotebook(t *testing.T, srv *httptest.Server, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(srv.URL+"/v1/notebooks/run", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out), "%s", b)
	return resp.StatusCode, out
}

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "notebooks", name+".ipynb"))
	require.NoError(t, err)
	return string(b)
}

func TestNotebookRun(t *testing.T) {
	t.Parallel()
	srv := notebookServer(t, true, httpapi.Options{})

	t.Run("parameters", func(t *testing.T) {
		code, out := postNotebook(t, srv, `{"notebook": `+fixture(t, "parameters")+`,
		  "parameters": {"alpha": 4, "name": "api", "flag": true, "items": [1], "config": {"k": null}, "nothing": null}}`)
		require.Equal(t, http.StatusOK, code, "%v", out)
		require.Equal(t, "ok", out["status"])
		require.Nil(t, out["failed_cell"])
		require.Nil(t, out["error"])
		require.Regexp(t, `^nb-`, out["session_id"])
		cells := out["notebook"].(map[string]any)["cells"].([]any)
		require.Len(t, cells, 5)
		injected := cells[2].(map[string]any)
		require.Equal(t, []any{"injected-parameters"}, injected["metadata"].(map[string]any)["tags"])
		printed, _ := json.Marshal(cells[3].(map[string]any)["outputs"])
		require.Contains(t, string(printed), `4 'api' True [1] {'k': None} None`)
		require.Len(t, out["cells"], 4)

		// The returned notebook is valid nbformat.
		nb, _ := json.Marshal(out["notebook"])
		path := filepath.Join(t.TempDir(), "out.ipynb")
		require.NoError(t, os.WriteFile(path, nb, 0o644))
		if o, err := exec.Command("/usr/bin/python3", "-c", "import nbformat,sys; nbformat.validate(nbformat.read(sys.argv[1], as_version=4))", path).CombinedOutput(); err != nil {
			require.Contains(t, string(o), "No module named", "nbformat.validate: %s", o)
		}
	})

	t.Run("failing cell", func(t *testing.T) {
		code, out := postNotebook(t, srv, `{"notebook": `+fixture(t, "fail")+`}`)
		require.Equal(t, http.StatusOK, code, "%v", out)
		require.Equal(t, "error", out["status"])
		require.Equal(t, 1.0, out["failed_cell"])
		e := out["error"].(map[string]any)
		require.Equal(t, "ValueError", e["ename"])
		require.Equal(t, "bad value", e["evalue"])
		require.Contains(t, strings.Join(toStrings(e["traceback"]), "\n"), `raise ValueError("bad value")`)
		cells := out["notebook"].(map[string]any)["cells"].([]any)
		require.Nil(t, cells[2].(map[string]any)["execution_count"])
	})

	t.Run("timeout in a named session", func(t *testing.T) {
		nb := `{"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": [
		  {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null, "source": "x = 5"},
		  {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null, "source": "import time\ntime.sleep(60)"}]}`
		code, out := postNotebook(t, srv, `{"notebook": `+nb+`, "cell_timeout_seconds": 1, "session_id": "api-nb"}`)
		require.Equal(t, http.StatusOK, code, "%v", out)
		require.Equal(t, "timeout", out["status"])
		require.Equal(t, 1.0, out["failed_cell"])
		require.Equal(t, "Timeout", out["error"].(map[string]any)["ename"])

		// The named session stays open, with the notebook's state.
		resp, err := http.Post(srv.URL+"/v1/sessions/api-nb/execute", "application/json", strings.NewReader(`{"code": "x"}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		var res api.Result
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&res))
		require.Equal(t, "5", res.Result)
	})
}

func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

func TestNotebookRunBadInput(t *testing.T) {
	t.Parallel()
	srv := notebookServer(t, true, httpapi.Options{MaxNotebookBytes: 64 << 10, MaxNotebookCells: 3})
	disabled := notebookServer(t, false, httpapi.Options{})
	good := `{"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null, "source": "1"}]}`
	for name, tc := range map[string]struct {
		body   string
		status int
		want   string
	}{
		"body not json":      {`{"notebook": `, 400, "body"},
		"no notebook":        {`{}`, 400, `"notebook" is required`},
		"notebook not json":  {`{"notebook": "not a notebook"}`, 400, "not a JSON object"},
		"nbformat 3":         {`{"notebook": {"nbformat": 3, "nbformat_minor": 0, "worksheets": []}}`, 400, "nbformat 3 is not supported"},
		"missing cells":      {`{"notebook": {"nbformat": 4, "nbformat_minor": 4, "metadata": {}}}`, 400, "no cells"},
		"unknown field":      {`{"notebook": ` + good + `, "colour": 1}`, 400, "unknown field"},
		"parameters list":    {`{"notebook": ` + good + `, "parameters": [1]}`, 400, "must be a JSON object"},
		"bad parameter name": {`{"notebook": ` + good + `, "parameters": {"a b": 1}}`, 400, "not a Python identifier"},
		"negative timeout":   {`{"notebook": ` + good + `, "cell_timeout_seconds": -1}`, 400, "cell_timeout_seconds"},
		"bad session":        {`{"notebook": ` + good + `, "session_id": "../x"}`, 400, "invalid session id"},
		"too large":          {`{"notebook": ` + strings.Replace(good, `"1"`, `"`+strings.Repeat("#", 70<<10)+`"`, 1) + `}`, 413, "over the server's limit of 64 KiB (65536 bytes)"},
		"too many cells":     {`{"notebook": ` + strings.Replace(good, `"cells": [`, `"cells": [`+strings.Repeat(`{"cell_type": "raw", "source": ""},`, 3), 1) + `}`, 413, "more than 3 cells"},
		"trailing data":      {`{"notebook": ` + good + `} {}`, 400, "data after"},
		"notebook twice":     {`{"notebook": ` + good + `, "notebook": ` + good + `}`, 400, "given twice"},
		"execution disabled": {`{"notebook": ` + good + `}`, 503, "disabled"},
		"disabled, not JSON": {`this is not read`, 503, "disabled"},
	} {
		t.Run(name, func(t *testing.T) {
			s := srv
			if strings.HasPrefix(name, "execution disabled") || strings.HasPrefix(name, "disabled") {
				s = disabled
			}
			code, out := postNotebook(t, s, tc.body)
			require.Equal(t, tc.status, code, "%v", out)
			require.Contains(t, out["error"].(map[string]any)["message"], tc.want)
		})
	}
}
