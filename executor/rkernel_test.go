package executor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// An R session (Options.Kernel "ir", Debian's IRkernel) on the local backend.
func TestRKernelLocal(t *testing.T) {
	testenv.Jupyter(t)
	testenv.RKernel(t)
	rSession(t, newEnv(t, func(o *executor.Options) { o.Kernel = "ir" }))
}

// An R session on the docker backend, in the image `kernelbox image build --with r`
// builds.
func TestRKernelDocker(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Image(t, testexec.RImage)
	rSession(t, newEnvOn(t, testexec.DockerWith(t, testexec.Real{R: true}), func(o *executor.Options) { o.Kernel = "ir" }))
}

// A kernel name the server has no kernelspec for fails the call with
// ErrKernelUnavailable, naming what the server offers: here R on the Python-only
// kernel image.
func TestRKernelMissingInImage(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	testenv.Image(t, testexec.DefaultImage)
	e := newDockerEnv(t, testexec.Real{}, func(o *executor.Options) { o.Kernel = "ir" })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := e.Execute(ctx, api.Request{SessionID: "r", Code: "1"})
	require.ErrorIs(t, err, executor.ErrKernelUnavailable)
	require.ErrorIs(t, err, api.ErrBackend)
	require.Contains(t, err.Error(), `no kernelspec "ir"`)
	require.Contains(t, err.Error(), "kernelbox-python3")
	t.Log(err)
}

// rSession runs the R checks of issue 24: state across calls, an R error as status
// error with the condition's message, plots as artifacts (png() into outputs/ and the
// kernel's inline image/png), a staged CSV read with read.csv.
func rSession(t *testing.T, e *env) {
	t.Helper()
	run := func(code string, inputs ...string) *api.Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		r, err := e.Execute(ctx, api.Request{SessionID: "r", Code: code, Inputs: inputs})
		require.NoError(t, err)
		return r
	}
	ok := func(r *api.Result) {
		t.Helper()
		require.Equal(t, api.StatusOK, r.Status, "error: %+v\nnotes: %v\nstderr: %s", r.Error, r.Notes, r.Stderr)
	}

	r := run("x <- 41")
	ok(r)
	require.Empty(t, r.Outputs)
	r = run("x + 1")
	ok(r)
	require.Equal(t, 2, r.ExecutionCount)
	// IRkernel shows a value as display_data (never execute_result).
	require.Equal(t, "[1] 42", plainText(t, r, "display_data"), "%+v", r.Outputs)
	r = run(`cat("to stdout\n"); message("to stderr")`)
	ok(r)
	require.Equal(t, "to stdout\n", r.Stdout)
	require.Contains(t, r.Stderr, "to stderr")

	r = run(`stop("no such column: ", x)`)
	require.Equal(t, api.StatusError, r.Status)
	require.NotNil(t, r.Error)
	require.Contains(t, r.Error.Evalue, "no such column: 41")
	require.Equal(t, "error", r.Outputs[len(r.Outputs)-1].OutputType)
	// The session lives on after an error.
	r = run("x")
	ok(r)
	require.Equal(t, "[1] 41", plainText(t, r, "display_data"))

	// A call over its timeout is interrupted (SIGINT, as IRkernel's kernelspec
	// leaves it), and the session's state survives.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := e.Execute(ctx, api.Request{SessionID: "r", Code: `y <- 1; Sys.sleep(120); y <- 2`, Timeout: 2 * time.Second})
	require.NoError(t, err)
	require.Equal(t, api.StatusTimeout, r.Status, "%+v", r)
	r = run("c(x, y)")
	ok(r)
	require.Equal(t, "[1] 41  1", plainText(t, r, "display_data"))

	// A plot written with png() into outputs/ is an artifact.
	r = run(`png("outputs/line.png", width = 320, height = 240); plot(1:10, type = "l"); invisible(dev.off())`)
	ok(r)
	a := artifact(t, r, "line.png")
	require.Equal(t, "image/png", a.MIME)
	b, err := os.ReadFile(a.Path)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")), "not a PNG: %q", b[:min(len(b), 16)])
	// An inline plot comes back as display_data image/png, saved as a display artifact.
	r = run("plot(1:3)")
	ok(r)
	var inline bool
	for _, a := range r.Artifacts {
		if a.MIME == "image/png" && strings.HasPrefix(a.Name, "display/") {
			b, err := os.ReadFile(a.Path)
			require.NoError(t, err)
			inline = bytes.HasPrefix(b, []byte("\x89PNG"))
		}
	}
	require.True(t, inline, "no inline PNG artifact: %+v", r.Artifacts)

	// An input is staged into inputs/ as for Python.
	csv := filepath.Join(e.Data, "bench.csv")
	require.NoError(t, os.WriteFile(csv, []byte("name,ms\nzmq,3.1\nhttp,4.2\nws,3.5\n"), 0o644))
	r = run(`df <- read.csv("inputs/bench.csv"); nrow(df) * 100 + sum(df$ms)`, csv)
	ok(r)
	require.Equal(t, "[1] 310.8", plainText(t, r, "display_data"))
	r = run(`write.csv(df[df$ms > 3.2, ], "outputs/slow.csv", row.names = FALSE)`)
	ok(r)
	b, err = os.ReadFile(artifact(t, r, "slow.csv").Path)
	require.NoError(t, err)
	require.Equal(t, "\"name\",\"ms\"\n\"http\",4.2\n\"ws\",3.5\n", string(b))
}

// plainText returns the text/plain of r's last output of type typ.
func plainText(t *testing.T, r *api.Result, typ string) string {
	t.Helper()
	for i := len(r.Outputs) - 1; i >= 0; i-- {
		if o := r.Outputs[i]; o.OutputType == typ {
			var s string
			require.NoError(t, json.Unmarshal(o.Data["text/plain"], &s))
			return s
		}
	}
	t.Fatalf("no %s output in %+v", typ, r.Outputs)
	return ""
}

// artifact returns r's artifact called name.
func artifact(t *testing.T, r *api.Result, name string) api.Artifact {
	t.Helper()
	for _, a := range r.Artifacts {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("no artifact %s in %+v (notes %v)", name, r.Artifacts, r.Notes)
	return api.Artifact{}
}
