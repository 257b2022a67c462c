package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// TestNotebookBrowser is issue 36's browser test: Notebook 6.4 (Debian's
// jupyter-notebook) pointed at a real `kernelbox serve` with --gateway-url, opened
// in Chromium. A notebook on the analyst template runs a cell that prints (with
// the template's preload) and one that plots; the page shows the text and the
// image, and the kernel is a kernelbox session of that template.
func TestNotebookBrowser(t *testing.T) {
	py := testenv.Jupyter(t)
	testenv.Imports(t, py, "notebook.gateway.managers", "matplotlib")
	b := newBrowser(t)
	const tok = "nb-browser-token"
	t.Setenv("KERNELBOX_TOKEN", tok) // serve reads it: no token in a command line
	ws, data := testDirs(t)
	tmpl := filepath.Join(t.TempDir(), "templates.json")
	require.NoError(t, os.WriteFile(tmpl, []byte(`{"templates": [
		{"name": "analyst", "description": "x preset", "preload": ["preset = 7"]}]}`), 0o600))
	_, url, log := rawServe(t, "--backend", "local", "--python", py, "--workspace", ws, "--workdir", data, "--templates", tmpl)
	jurl := startJupyterServer(t, py, "notebook", url, tok)

	// The notebook file, on the analyst template's kernelspec, through Notebook's
	// own contents API.
	nb := map[string]any{"type": "notebook", "content": map[string]any{
		"nbformat": 4, "nbformat_minor": 5,
		"metadata": map[string]any{"kernelspec": map[string]any{"name": "analyst", "display_name": "analyst", "language": "python"}},
		"cells": []any{
			map[string]any{"cell_type": "code", "id": "c1", "metadata": map[string]any{}, "outputs": []any{}, "execution_count": nil,
				"source": "print('hello from kernelbox', preset * 6)"},
			map[string]any{"cell_type": "code", "id": "c2", "metadata": map[string]any{}, "outputs": []any{}, "execution_count": nil,
				"source": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()"},
		}}}
	body, err := json.Marshal(nb)
	require.NoError(t, err)
	st, msg := jupyterDo(t, "PUT", jurl+"/api/contents/kb.ipynb", body)
	require.Equal(t, http.StatusCreated, st, string(msg))

	b.do(chromedp.Navigate(jurl + "/notebooks/kb.ipynb?token=jtok"))
	b.waitFor("the notebook's kernel to be ready",
		`window.Jupyter && Jupyter.notebook && Jupyter.notebook.kernel && Jupyter.notebook.kernel.is_connected() && document.querySelector('#kernel_indicator_icon.kernel_idle_icon')`,
		2*time.Minute)
	kernel := eval[string](b, `Jupyter.notebook.kernel.id`)
	sessions := getJSON(t, url+"/v1/sessions", tok)
	require.Contains(t, sessions, `"id":"`+kernel+`"`, "the notebook's kernel is a kernelbox session; serve log:\n%s", log)
	require.Contains(t, sessions, `"template":"analyst"`)

	b.do(chromedp.Evaluate[chromedp.Void](`Jupyter.notebook.execute_all_cells()`))
	b.waitFor("the printed text", `[...document.querySelectorAll('.output_area pre')].some(p => p.innerText.includes('hello from kernelbox 42'))`, time.Minute)
	b.waitFor("the plot", `[...document.querySelectorAll('.output_area img')].some(i => i.complete && i.naturalWidth > 100)`, time.Minute)
	w := eval[int](b, `Math.max(...[...document.querySelectorAll('.output_area img')].map(i => i.naturalWidth))`)
	t.Logf("notebook kernel %s: the text and a %d px wide plot are in the page", kernel, w)
	b.screenshot(os.Getenv("KERNELBOX_DASHBOARD_SCREENSHOTS"), "notebook.png")

	// Shut down from the page: the session ends with it.
	b.do(chromedp.Evaluate[chromedp.Void](`Jupyter.notebook.session.delete()`))
	require.Eventually(t, func() bool {
		return !bytes.Contains([]byte(getJSON(t, url+"/v1/sessions", tok)), []byte(kernel))
	}, time.Minute, 200*time.Millisecond, "the kernel's session ends with the notebook's session")
}
