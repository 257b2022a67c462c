package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// TestNotebookBrowserPython3 is issue 52's: a notebook saved elsewhere, whose
// kernelspec is "python3" (as nearly every .ipynb's is), opens in Notebook 6.4
// (--gateway-url at a serve with no templates file) in Chromium without a "kernel
// not found" dialog, runs its cells on the default template, and keeps its
// kernelspec.
func TestNotebookBrowserPython3(t *testing.T) {
	py := testenv.Jupyter(t)
	testenv.Imports(t, py, "notebook.gateway.managers")
	b := newBrowser(t)
	const tok = "nb-python3-token"
	t.Setenv("KERNELBOX_TOKEN", tok) // serve reads it: no token in a command line
	ws, data := testDirs(t)
	_, url, log := rawServe(t, "--backend", "local", "--python", py, "--workspace", ws, "--workdir", data)
	jurl := startJupyterServer(t, py, "notebook", url, tok)

	nb := map[string]any{"type": "notebook", "content": map[string]any{
		"nbformat": 4, "nbformat_minor": 5,
		"metadata": map[string]any{
			"kernelspec":    map[string]any{"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
			"language_info": map[string]any{"name": "python", "version": "3.11.2"},
		},
		"cells": []any{
			map[string]any{"cell_type": "code", "id": "c1", "metadata": map[string]any{}, "outputs": []any{}, "execution_count": nil,
				"source": "answer = 6 * 7"},
			map[string]any{"cell_type": "code", "id": "c2", "metadata": map[string]any{}, "outputs": []any{}, "execution_count": nil,
				"source": "print('python3 notebook on kernelbox', answer)"},
		}}}
	body, err := json.Marshal(nb)
	require.NoError(t, err)
	st, msg := jupyterDo(t, "PUT", jurl+"/api/contents/elsewhere.ipynb", body)
	require.Equal(t, http.StatusCreated, st, string(msg))

	b.do(chromedp.Navigate(jurl + "/notebooks/elsewhere.ipynb?token=jtok"))
	b.waitFor("the notebook's kernel to be ready",
		`window.Jupyter && Jupyter.notebook && Jupyter.notebook.kernel && Jupyter.notebook.kernel.is_connected() && document.querySelector('#kernel_indicator_icon.kernel_idle_icon')`,
		2*time.Minute)
	dialogs := eval[string](b, `[...document.querySelectorAll('.modal-dialog')].filter(d => d.offsetParent !== null).map(d => d.innerText).join(' | ')`)
	require.Empty(t, dialogs, "a dialog opened over the notebook")
	require.Equal(t, "python3", eval[string](b, `Jupyter.notebook.kernel.name`))
	kernel := eval[string](b, `Jupyter.notebook.kernel.id`)
	sessions := getJSON(t, url+"/v1/sessions", tok)
	require.Contains(t, sessions, `"id":"`+kernel+`"`, "the notebook's kernel is a kernelbox session; serve log:\n%s", log)
	require.Contains(t, sessions, `"template":"default"`)

	b.do(chromedp.Evaluate[chromedp.Void](`Jupyter.notebook.execute_all_cells()`))
	b.waitFor("the printed text", `[...document.querySelectorAll('.output_area pre')].some(p => p.innerText.includes('python3 notebook on kernelbox 42'))`, time.Minute)
	require.Equal(t, "python3", eval[string](b, `Jupyter.notebook.metadata.kernelspec.name`), "the notebook keeps its kernelspec")
	b.do(chromedp.Evaluate[chromedp.Void](`Jupyter.notebook.session.delete()`))
	require.Eventually(t, func() bool {
		return !strings.Contains(getJSON(t, url+"/v1/sessions", tok), kernel)
	}, time.Minute, 200*time.Millisecond, "the kernel's session ends with the notebook's session")
}

// TestJupyterServerFirstStart: Jupyter Server 1.23 asks its gateway for its own
// default kernel name, "python3", when a client starts a kernel before it has read
// the gateway's kernelspecs; kernelbox starts the default template for it.
func TestJupyterServerFirstStart(t *testing.T) {
	t.Parallel()
	py := testenv.Jupyter(t)
	testenv.Imports(t, py, "jupyter_server.gateway.managers")
	const tok = "js-first-token"
	ws, data := testDirs(t)
	_, url, log := rawServeEnv(t, []string{"KERNELBOX_TOKEN=" + tok}, "--backend", "local", "--python", py, "--workspace", ws, "--workdir", data)
	jurl := startJupyterServer(t, py, "jupyter_server", url, tok)

	st, b := jupyterDo(t, "POST", jurl+"/api/kernels", []byte(`{}`))
	require.Equal(t, http.StatusCreated, st, "%s\nserve log:\n%s", b, log)
	var k struct{ ID, Name string }
	require.NoError(t, json.Unmarshal(b, &k))
	t.Logf("Jupyter Server's first start asked for %q; kernel %s", k.Name, k.ID)
	sessions := getJSON(t, url+"/v1/sessions", tok)
	require.Contains(t, sessions, `"id":"`+k.ID+`"`)
	require.Contains(t, sessions, `"template":"default"`)
	st, _ = jupyterDo(t, "DELETE", jurl+"/api/kernels/"+k.ID, nil)
	require.Equal(t, http.StatusNoContent, st)
}

// jupyterDo sends a request with body (none when nil) to the Jupyter server the
// tests start (its token "jtok") and returns the status and the answer.
func jupyterDo(t *testing.T, method, url string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "token jtok")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}
