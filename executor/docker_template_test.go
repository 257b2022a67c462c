package executor_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
	"github.com/kernelbox/kernelbox/templates"
)

// dockerCaps are the caps `kernelbox serve --backend docker --memory 1g` puts on
// templates (cmd/kernelbox serverLimits).
var dockerCaps = testexec.DockerCaps(1 << 30)

// loadTemplates reads a templates document as `serve --templates` does, with caps.
func loadTemplates(t *testing.T, doc string, caps templates.Caps) []executor.Template {
	t.Helper()
	ts, err := templates.Parse(strings.NewReader(doc), t.TempDir(), caps)
	require.NoError(t, err)
	return ts
}

// containerOf returns `docker inspect` fields (a Go template) of the container of
// this test process whose session label is session.
func containerOf(t *testing.T, session, format string) string {
	t.Helper()
	var id string
	for _, c := range dockerContainers(t) {
		out, err := exec.Command("docker", "inspect", "--format", `{{index .Config.Labels "`+testexec.LabelSession+`"}}`, c).Output()
		if err != nil {
			continue // removed since it was listed (a warm pool's container, a closed session's)
		}
		if strings.TrimSpace(string(out)) == session {
			require.Empty(t, id, "two containers for session %s", session)
			id = c
		}
	}
	require.NotEmpty(t, id, "no container for session %s", session)
	out, err := exec.Command("docker", "inspect", "--format", format, id).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// Two templates of one docker server (one backend, one executor) with different
// memory limits, loaded from a templates file: each session's container has its
// template's limits and environment, an allocation that fits the bigger one kills the
// smaller one's kernel only, and neither session can change template.
func TestDockerTemplatesMemory(t *testing.T) {
	ts := loadTemplates(t, `{"templates": [
	  {"name": "small", "memory": "256m", "pids": 128, "env": {"KB_TEMPLATE": "small"},
	   "preload": "import json as preloaded"},
	  {"name": "big", "memory": "1g", "env": {"KB_TEMPLATE": "big"},
	   "preload": "import json as preloaded"}
	]}`, dockerCaps)
	e := newDockerEnv(t, testexec.Real{Memory: 1 << 30}, func(o *executor.Options) {
		o.Templates = ts
		o.StartTimeout = 3 * time.Minute
	})
	ctx := context.Background()
	first := func(session, template string) *api.Result {
		t.Helper()
		r, err := e.Execute(ctx, api.Request{SessionID: session, Template: template,
			Code: "import os\nprint(os.environ['KB_TEMPLATE'], preloaded.__name__)\nx = 7"})
		require.NoError(t, err)
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		return r
	}
	require.Equal(t, "small json\n", first("s-small", "small").Stdout, "the template's env and preload")
	require.Equal(t, "big json\n", first("s-big", "big").Stdout)

	// The limits, as the engine holds them: memory with as much swap (none used),
	// pids; the big one's pids are the server's.
	require.Equal(t, "268435456 268435456 128", containerOf(t, "s-small", "{{.HostConfig.Memory}} {{.HostConfig.MemorySwap}} {{.HostConfig.PidsLimit}}"))
	require.Equal(t, "1073741824 1073741824 512", containerOf(t, "s-big", "{{.HostConfig.Memory}} {{.HostConfig.MemorySwap}} {{.HostConfig.PidsLimit}}"))

	// A session keeps its template: naming the other is refused with both names,
	// and nothing runs.
	_, err := e.Execute(ctx, api.Request{SessionID: "s-small", Template: "big", Code: "x = 8"})
	require.ErrorIs(t, err, api.ErrTemplateMismatch)
	require.ErrorContains(t, err, `created with template "small"; this call names "big"`)
	_, err = e.CreateSession(ctx, "s-big", "small")
	require.ErrorIs(t, err, api.ErrTemplateMismatch)
	require.Equal(t, "7", e.run(t, "s-small", "x").Result)

	// 400 MiB, every page touched: over the small template's 256 MiB, well under the
	// big one's 1 GiB.
	const alloc = "b = bytearray(400 << 20)\nb[::4096] = b'x' * len(b[::4096])\nlen(b) >> 20"
	r := e.run(t, "s-big", alloc)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "400", r.Result)
	require.Equal(t, "7", e.run(t, "s-big", "x").Result, "the big session kept its state")

	r = e.run(t, "s-small", alloc)
	require.Equal(t, api.StatusKernelDied, r.Status, "%+v", r.Error)
	require.Contains(t, r.Error.Evalue, "OOM")
	require.True(t, r.StateLost)
	// The small session's new kernel is still the small template's: its limit,
	// its preload, its env.
	r = e.run(t, "s-small", "import os\nprint(os.environ['KB_TEMPLATE'], preloaded.__name__)")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "small json\n", r.Stdout)
	require.Equal(t, "268435456", containerOf(t, "s-small", "{{.HostConfig.Memory}}"))

	info, err := e.Session("s-small")
	require.NoError(t, err)
	require.Equal(t, "small", info.Template)
	require.NoError(t, e.Close())
	require.Empty(t, dockerContainers(t), "Close leaves no container")
}

// A template whose preload fails on docker fails the session's start with the
// error, its traceback and what it printed; its container is removed, and the next
// call fails the same way.
func TestDockerTemplatePreloadFails(t *testing.T) {
	ts := loadTemplates(t, `{"templates": [{"name": "broken", "preload": [
	  "import pandas as pd",
	  "print('loading the reference tables')",
	  "def load():",
	  "    return pd.read_csv('/no/such/reference.csv')",
	  "tables = load()"
	]}]}`, dockerCaps)
	e := newDockerEnv(t, testexec.Real{Memory: 1 << 30}, func(o *executor.Options) {
		o.Templates = ts
		o.StartTimeout = 3 * time.Minute
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := range 2 {
		_, err := e.Execute(ctx, api.Request{SessionID: "p", Template: "broken", Code: "tables"})
		require.ErrorIs(t, err, api.ErrBackend)
		var pe *executor.PreloadError
		require.True(t, errors.As(err, &pe), "%v", err)
		require.Equal(t, "broken", pe.Template)
		require.Equal(t, "FileNotFoundError", pe.Ename)
		msg := err.Error()
		require.Contains(t, msg, `template "broken": the preload cell failed in a fresh kernel: FileNotFoundError:`)
		require.Contains(t, msg, "/no/such/reference.csv")
		require.Contains(t, msg, "traceback:\n")
		// pandas' frames make the traceback long: it keeps the preload's lines
		// and the frame that raised, and says what it cut between them.
		require.Contains(t, msg, "----> 5 tables = load()", "the preload's failing line, numbered")
		require.Contains(t, msg, "bytes cut …]")
		require.Contains(t, msg, "FileNotFoundError: [Errno 2] No such file or directory: '/no/such/reference.csv'\noutput before the error:")
		require.NotContains(t, msg, "\x1b[", "no ANSI colours")
		require.Contains(t, msg, "output before the error:\nloading the reference tables")
		require.Eventually(t, func() bool { return len(dockerContainers(t)) == 0 }, time.Minute, 100*time.Millisecond,
			"the failed kernel's container is removed")
		if i == 0 {
			t.Logf("the start error:\n%s", msg)
		}
	}
}

// The example templates file (examples/templates.json) loads under serve's default
// docker caps and works on docker: its analyst template's warm kernel has pandas and
// pyplot imported before the first call, and its R template runs R.
func TestDockerExampleTemplates(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Image(t, testexec.RImage)
	ts, err := templates.Load(filepath.Join("..", "examples", "templates.json"), testexec.DockerCaps(0))
	require.NoError(t, err)
	e := newDockerEnv(t, testexec.Real{}, func(o *executor.Options) {
		o.Templates = ts
		o.StartTimeout = 3 * time.Minute
	})
	require.Eventually(t, func() bool { return e.WarmReadyOf("python-analyst") == 1 }, 5*time.Minute, 50*time.Millisecond)
	csv := filepath.Join(e.Data, "benchmarks.csv")
	require.NoError(t, os.WriteFile(csv, []byte("model,top1\na,56.5\nb,69.8\nc,76.1\n"), 0o644))
	ctx := context.Background()
	// What the template promises is there before any import in the cell.
	r, err := e.Execute(ctx, api.Request{SessionID: "an", Template: "python-analyst", Inputs: []string{csv},
		Code: "df = pd.read_csv('inputs/benchmarks.csv'); print(plt.__name__); df.describe().loc['count', 'top1']"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "matplotlib.pyplot\n", r.Stdout)
	require.Equal(t, "3.0", r.Result)
	require.Equal(t, 1, r.ExecutionCount, "the preload is silent")
	t.Logf("the analyst template's first cell on a warm kernel: %d ms", r.DurationMS)

	// A session whose first call named no template is the default's (Python),
	// and stays so.
	r = e.run(t, "py", "x = 41")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	_, err = e.Execute(ctx, api.Request{SessionID: "py", Template: "r", Code: "x + 1"})
	require.ErrorIs(t, err, api.ErrTemplateMismatch)
	r, err = e.Execute(ctx, api.Request{SessionID: "r2", Template: "r", Code: "x <- 41\nx + 1"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "[1] 42", plainText(t, r, "display_data"))
	require.Equal(t, testexec.RImage, containerOf(t, "r2", "{{.Config.Image}}"))
}
