package notebook_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
	"github.com/kernelbox/kernelbox/notebook"
)

// fixtures is where the test notebooks live.
const fixtures = "../testdata/notebooks"

// env is an executor on the local backend whose policy lets inputs be read from Data.
type env struct {
	*executor.Executor
	Python string
	Data   string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	py := testenv.Jupyter(t)
	te := testexec.Local(t, nil)
	return &env{Executor: te.Exec, Python: py, Data: te.Data}
}

func readFixture(t testing.TB, name string) *notebook.Notebook {
	t.Helper()
	f, err := os.Open(filepath.Join(fixtures, name+".ipynb"))
	require.NoError(t, err)
	defer f.Close()
	nb, err := notebook.Read(f)
	require.NoError(t, err)
	return nb
}

func runNotebook(t testing.TB, e *env, nb *notebook.Notebook, opts notebook.RunOptions) *notebook.Report {
	t.Helper()
	rep, err := notebook.Run(context.Background(), e.Executor, nb, opts)
	require.NoError(t, err)
	return rep
}

// encode writes nb to a file in a temp dir and returns its path.
func encode(t testing.TB, nb *notebook.Notebook) string {
	t.Helper()
	b, err := nb.Encode()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "out.ipynb")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// validate checks a notebook file against the nbformat schema with Python's nbformat.
func validate(t testing.TB, path string) {
	t.Helper()
	out, err := exec.Command(nbPython(t), "-c",
		"import nbformat,sys; nbformat.validate(nbformat.read(sys.argv[1], as_version=4))", path).CombinedOutput()
	require.NoError(t, err, "nbformat.validate: %s", out)
}

// nbPython returns an interpreter with nbformat and nbclient (Debian's
// /usr/bin/python3 here; KERNELBOX_NBCLIENT_PYTHON overrides it).
func nbPython(t testing.TB) string {
	t.Helper()
	py := os.Getenv("KERNELBOX_NBCLIENT_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	testenv.Imports(t, py, "nbformat", "nbclient")
	return py
}

// nbclientScript executes notebooks with nbclient: argv is OUTDIR CWD NB..., and each
// executed notebook is written to OUTDIR under its base name. A cell error stops that
// notebook, as in nbclient, and the notebook is written as far as it got.
const nbclientScript = `
import os, sys, nbformat
from nbclient import NotebookClient
outdir, cwd = sys.argv[1:3]
for path in sys.argv[3:]:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": cwd}})
    try:
        client.execute()
    except Exception as e:
        print(os.path.basename(path), type(e).__name__, file=sys.stderr)
    nbformat.write(nb, os.path.join(outdir, os.path.basename(path)))
`

var (
	ansi     = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)
	address  = regexp.MustCompile(`0x[0-9a-f]{6,16}`)
	cellFile = regexp.MustCompile(`/tmp/ipykernel_\d+/\d+\.py`)
)

// normalize reduces a notebook file to what must agree between two executions of it,
// cell by cell: cell type, source, metadata without nbclient's timing
// ("execution"), execution_count and outputs. In outputs, multiline strings are
// joined, consecutive streams merged (nbclient keeps one output per message),
// memory addresses and the kernel's temp file names masked, image bytes replaced by
// a marker, and tracebacks stripped of ANSI colors.
func normalize(t testing.TB, b []byte) []map[string]any {
	t.Helper()
	var nb struct {
		Cells []map[string]any `json:"cells"`
	}
	require.NoError(t, json.Unmarshal(b, &nb))
	cells := make([]map[string]any, 0, len(nb.Cells))
	for _, c := range nb.Cells {
		n := map[string]any{"cell_type": c["cell_type"], "source": joinText(c["source"])}
		meta, _ := c["metadata"].(map[string]any)
		delete(meta, "execution")
		n["metadata"] = meta
		if c["cell_type"] == "code" {
			n["execution_count"] = c["execution_count"]
			n["outputs"] = normalizeOutputs(c["outputs"])
		}
		cells = append(cells, n)
	}
	return cells
}

func normalizeOutputs(v any) []any {
	list, _ := v.([]any)
	outs := []any{}
	for _, o := range list {
		out := o.(map[string]any)
		switch out["output_type"] {
		case "stream":
			text := mask(joinText(out["text"]))
			if n := len(outs); n > 0 {
				prev := outs[n-1].(map[string]any)
				if prev["output_type"] == "stream" && prev["name"] == out["name"] {
					prev["text"] = prev["text"].(string) + text
					continue
				}
			}
			outs = append(outs, map[string]any{"output_type": "stream", "name": out["name"], "text": text})
		case "error":
			var tb []string
			for _, l := range out["traceback"].([]any) {
				tb = append(tb, mask(ansi.ReplaceAllString(l.(string), "")))
			}
			outs = append(outs, map[string]any{
				"output_type": "error", "ename": out["ename"], "evalue": mask(out["evalue"].(string)),
				"traceback": strings.Join(tb, "\n"),
			})
		default:
			n := map[string]any{"output_type": out["output_type"], "metadata": out["metadata"]}
			if ec, ok := out["execution_count"]; ok {
				n["execution_count"] = ec
			}
			data := map[string]any{}
			for mime, val := range out["data"].(map[string]any) {
				switch {
				case strings.HasPrefix(mime, "image/"):
					data[mime] = "<image bytes>"
				case isText(val):
					data[mime] = mask(joinText(val))
				default:
					data[mime] = val
				}
			}
			n["data"] = data
			outs = append(outs, n)
		}
	}
	return outs
}

func isText(v any) bool {
	switch v := v.(type) {
	case string:
		return true
	case []any:
		for _, s := range v {
			if _, ok := s.(string); !ok {
				return false
			}
		}
		return true
	}
	return false
}

func joinText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []any:
		var b strings.Builder
		for _, s := range v {
			b.WriteString(s.(string))
		}
		return b.String()
	}
	return ""
}

func mask(s string) string {
	s = address.ReplaceAllString(s, "<address>")
	return cellFile.ReplaceAllString(s, "<cell file>")
}
