package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/docker"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// TestDemoLocal runs the whole demo on local kernels, calling run directly.
func TestDemoLocal(t *testing.T) {
	t.Parallel()
	py := testenv.Jupyter(t)
	testenv.Imports(t, py, "pandas", "matplotlib")
	ws := t.TempDir()
	out := runDemo(t, "--backend", "local", "--python", py, "--workspace", ws, "--scripted")
	checkDemo(t, out, ws, "local")
}

// TestDemoDocker runs the whole demo in containers. CI sets KERNELBOX_REQUIRE_DOCKER=1,
// so there a missing daemon or image fails the test instead of skipping it.
func TestDemoDocker(t *testing.T) {
	t.Parallel()
	testenv.Image(t, docker.DefaultImage)
	ws := t.TempDir()
	out := runDemo(t, "--backend", "docker", "--workspace", ws, "--scripted")
	checkDemo(t, out, ws, "docker")
}

// TestGoRun runs the demo the way the README does, with go run from the module root
// and the default backend (docker when it is there, else local).
func TestGoRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo; skipped with -short")
	}
	t.Parallel()
	py := testenv.Jupyter(t)
	testenv.Imports(t, py, "pandas", "matplotlib")
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "go test puts GOROOT/bin on PATH")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	ws := t.TempDir()

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "run", "./examples/research_demo", "--workspace", ws)
	cmd.Dir = root
	cmd.Env = withoutLLM(os.Environ()) // never reach a model from a test
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go run ./examples/research_demo:\n%s", out)
	checkDemo(t, string(out), ws, "")
}

// runDemo calls run and returns what it printed, failing t if it fails.
func runDemo(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, args, &out)
	require.NoError(t, err, "run %v:\n%s", args, out.String())
	t.Logf("output of run %v:\n%s", args, out.String())
	return out.String()
}

// checkDemo checks a finished demo: the backend it said it used, the artifacts, the
// answer against one computed here from the CSV, that the DataFrame was loaded once,
// and that the denied input was reported before later steps ran.
func checkDemo(t *testing.T, out, ws, backend string) {
	t.Helper()
	if backend != "" {
		require.Contains(t, out, "backend:   "+backend+" (")
	}

	dirs, err := filepath.Glob(filepath.Join(ws, "artifacts", "data_analyst-*"))
	require.NoError(t, err)
	require.Len(t, dirs, 1, "one session's artifacts")
	arts := dirs[0]

	png, err := os.ReadFile(filepath.Join(arts, plotName))
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")), "the plot is a PNG")
	require.Greater(t, len(png), 20<<10, "the plot has content")

	want := bestFromCSV(t, filepath.Join("data", "benchmarks.csv"))
	report, err := os.ReadFile(filepath.Join(arts, reportName))
	require.NoError(t, err)
	require.Contains(t, string(report), "**Best model: "+want.model+"**", "the report names the best model")

	var summary struct {
		BestModel   string            `json:"best_model"`
		BestPerYear map[string]string `json:"best_per_year"`
		Rows        int               `json:"rows"`
		DFLoads     int               `json:"df_loads"`
		Preloaded   []string          `json:"preloaded"`
	}
	b, err := os.ReadFile(filepath.Join(arts, "summary.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &summary))
	require.Equal(t, want.model, summary.BestModel)
	require.Equal(t, want.perYear, summary.BestPerYear)
	require.Equal(t, want.rows, summary.Rows)
	require.Equal(t, 1, summary.DFLoads, "the kernel read the CSV once; later cells reused df")
	require.Equal(t, []string{"pd", "plt"}, summary.Preloaded, "the analyst's template imported pandas and pyplot before the first cell")
	require.Regexp(t, `(?m)^template:  analyst: pandas as pd .*; its warm kernel, past the preload, was ready after \d+\.\d s$`, out)

	// The denial is reported with its rules, and the plan carries on after it.
	denied := regexp.MustCompile(`(?m)^\[(\d+)/(\d+)\] data_analyst: try to stage the project's \.ssh/id_rsa .* \.\.\. denied \(\d+ ms\)$`).FindStringSubmatch(out)
	require.NotNil(t, denied, "the denied step's progress line")
	require.Contains(t, out, `denied by rule "SSH keys" (builtin)`)
	i, _ := strconv.Atoi(denied[1])
	n, _ := strconv.Atoi(denied[2])
	require.Less(t, i, n, "the denial is not the last step")
	for next := i + 1; next <= n; next++ {
		line := regexp.MustCompile(`(?m)^\[` + strconv.Itoa(next) + `/` + strconv.Itoa(n) + `\] data_analyst: .* \.\.\. ok \(`)
		require.Regexp(t, line, out, "step %d ran after the denial", next)
	}

	// It ends with the artifact paths.
	require.Contains(t, out, "plot:    "+filepath.Join(arts, plotName))
	require.Contains(t, out, "report:  "+filepath.Join(arts, reportName))

	// The session's directory is gone; its artifacts stay.
	sessions, err := os.ReadDir(filepath.Join(ws, "sessions"))
	require.NoError(t, err)
	require.Empty(t, sessions)
}

// expected is the answer computed in Go from the CSV.
type expected struct {
	model   string            // argmax of top1_accuracy / params_millions
	perYear map[string]string // the same argmax within each year
	rows    int
}

func bestFromCSV(t *testing.T, path string) expected {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.Greater(t, len(records), 12, "at least 12 models")
	col := map[string]int{}
	for i, name := range records[0] {
		col[name] = i
	}
	for _, name := range []string{"model", "year", "top1_accuracy", "params_millions"} {
		require.Contains(t, col, name)
	}
	e := expected{perYear: map[string]string{}, rows: len(records) - 1}
	best, bestYear := -1.0, map[string]float64{}
	for _, r := range records[1:] {
		acc, err := strconv.ParseFloat(r[col["top1_accuracy"]], 64)
		require.NoError(t, err)
		params, err := strconv.ParseFloat(r[col["params_millions"]], 64)
		require.NoError(t, err)
		v := acc / params
		if v > best {
			best, e.model = v, r[col["model"]]
		}
		if y := r[col["year"]]; v > bestYear[y] {
			bestYear[y], e.perYear[y] = v, r[col["model"]]
		}
	}
	return e
}

// TestPlanLoadsCSVOnce checks the scripted plan: only its first step stages and reads
// the CSV; the later ones work on the DataFrame the kernel kept.
func TestPlanLoadsCSVOnce(t *testing.T) {
	t.Parallel()
	steps := plan(question)
	require.GreaterOrEqual(t, len(steps), 5, "at least four cells run, plus the denied one")
	for i, s := range steps {
		code, err := s.code()
		require.NoError(t, err, s.cell)
		switch {
		case i == 0:
			require.Equal(t, []string{"benchmarks.csv"}, s.inputs)
			require.Contains(t, code, `df = pd.read_csv("inputs/benchmarks.csv")`)
		case s.wantDenied:
			require.Equal(t, []string{".ssh/id_rsa"}, s.inputs)
		default:
			require.Empty(t, s.inputs, s.cell)
			require.NotContains(t, code, "read_csv", s.cell)
			require.Regexp(t, `\bdf\b|\bbest\b|\bbest_eff_by_year\b`, code, "%s builds on the kernel's state", s.cell)
		}
	}
}

// TestEmbeddedCSVIsTheDataFile guards against the embedded table drifting from
// data/benchmarks.csv, which SOURCES.md documents.
func TestEmbeddedCSVIsTheDataFile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("data", "benchmarks.csv"))
	require.NoError(t, err)
	require.Equal(t, string(b), string(benchmarksCSV))
}

// withoutLLM drops the variables that would make the demo call a model.
func withoutLLM(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "KERNELBOX_LLM_") {
			out = append(out, kv)
		}
	}
	return out
}
