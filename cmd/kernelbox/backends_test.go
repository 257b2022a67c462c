package main

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/docker"
	"github.com/kernelbox/kernelbox/backends/swarm"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// TestBackendTableRows: every row can be looked up and built from, --backend's
// usage lists them all, and an unknown name is refused with the table's names.
func TestBackendTableRows(t *testing.T) {
	t.Parallel()
	usage := backendUsage()
	for _, b := range backends() {
		got, err := lookupBackend(b.name)
		require.NoError(t, err)
		assert.Equal(t, b.name, got.name)
		assert.NotNil(t, b.open, b.name)
		assert.Contains(t, usage, b.about)
	}
	b, err := lookupBackend("")
	require.NoError(t, err)
	assert.Equal(t, "none", b.name, `"" is none, as --backend "" always was`)
	_, err = lookupBackend("podman")
	require.EqualError(t, err, `unknown backend "podman": use none, local, docker, remote or swarm`)
}

// TestTemplateCapsFromTable: what one session gets, and so what a template may ask
// at most, comes from the backend's row: docker and swarm their container limits
// (the flags' or the backend's defaults), the others no container limit.
func TestTemplateCapsFromTable(t *testing.T) {
	t.Parallel()
	python := executor.Limits{Kernel: "python3"}
	for _, tc := range []struct {
		args []string
		want executor.Limits
	}{
		{[]string{"--backend", "none"}, python},
		{[]string{"--backend", "local"}, python},
		{[]string{"--backend", "remote"}, python},
		{[]string{"--backend", "docker"}, executor.Limits{Kernel: "python3", Image: docker.DefaultImage, Memory: docker.DefaultMemory,
			CPUs: docker.DefaultCPUs, Pids: docker.DefaultPidsLimit, MaxLifetime: docker.DefaultMaxLifetime}},
		{[]string{"--backend", "swarm", "--image", "img", "--swarm-cpus", "1.5"}, executor.Limits{Kernel: "python3", Image: "img", Memory: swarm.DefaultMemory,
			CPUs: 1.5, Pids: swarm.DefaultPidsLimit, MaxLifetime: swarm.DefaultMaxLifetime}},
		{[]string{"--backend", "swarm", "--memory", "none"}, executor.Limits{Kernel: "python3", Image: swarm.DefaultImage,
			CPUs: swarm.DefaultCPUs, Pids: swarm.DefaultPidsLimit, MaxLifetime: swarm.DefaultMaxLifetime}},
	} {
		fs, o := serveFlagSet(io.Discard)
		require.NoError(t, fs.Parse(append(tc.args, "--idle-timeout", "20m")))
		b, err := lookupBackend(o.engine.backend)
		require.NoError(t, err)
		l, caps := o.engine.serverLimits(b)
		assert.Equal(t, tc.want, l, "%v", tc.args)
		assert.Equal(t, l.Memory, caps.Memory, "%v", tc.args)
		assert.Equal(t, l.CPUs, caps.CPUs, "%v", tc.args)
		assert.Equal(t, l.Pids, caps.Pids, "%v", tc.args)
		assert.Equal(t, l.MaxLifetime, caps.MaxLifetime, "%v", tc.args)
		assert.Equal(t, "20m0s", caps.IdleTimeout.String(), "%v", tc.args)
	}
}

// TestCapacityPlanOnlyWhereTheTableSays: only docker plans its sessions' memory;
// the other backends keep --max-sessions as given (0: the executor's default)
// and set no session memory.
func TestCapacityPlanOnlyWhereTheTableSays(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		assert.Equal(t, b.name == "docker", b.plan != nil, b.name)
		if b.plan != nil {
			continue
		}
		f := newEngineFlags(b.name)
		f.pool.maxSessions = 7
		var logs bytes.Buffer
		f.planCapacity(context.Background(), b, slog.New(slog.NewTextHandler(&logs, nil)))
		assert.Equal(t, 7, f.pool.maxSessions, b.name)
		assert.Zero(t, f.backends.sessionMemory, b.name)
		assert.Empty(t, logs.String(), b.name)
	}
}

// TestDoctorFollowsTable: doctor runs the rows' checks in the table's order (the
// local backend's Python, then docker's engine, image, runtime and capacity), swarm's only
// when --swarm-host is given, then the image build's.
func TestDoctorFollowsTable(t *testing.T) {
	py := testenv.Jupyter(t)
	var stdout bytes.Buffer
	err := dispatch(context.Background(), []string{"doctor", "--python", py}, &stdout, io.Discard)
	if err != nil {
		require.Equal(t, 1, err.(exitCode).code, "%v", err)
	}
	var what []string
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if strings.HasPrefix(line, "[") {
			what = append(what, strings.TrimSpace(line[7:29]))
		}
	}
	want := []string{"python + jupyter", "docker engine", "kernel image", "container runtime", "docker capacity", "debootstrap"}
	if len(what) == 3 { // no Docker daemon: its check stops at the engine
		want = []string{"python + jupyter", "docker engine", "debootstrap"}
	}
	require.Equal(t, want, what, stdout.String())
	require.Contains(t, stdout.String(), "[ok  ] python + jupyter       "+py)
}

// TestBenchBackendsFromTable: `kernelbox bench` measures the rows the table marks
// measurable, with the table's constructor, and refuses the others.
func TestBenchBackendsFromTable(t *testing.T) {
	t.Parallel()
	got, err := benchTable([]string{"local", "docker"}, "/usr/bin/python3")
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "local", got[0].Name)
	assert.False(t, got[0].Containers)
	assert.Equal(t, "docker", got[1].Name)
	assert.True(t, got[1].Containers, "docker sessions are containers: the memory rows read docker stats")
	for _, name := range []string{"none", "remote", "swarm", "podman"} {
		_, err := benchTable([]string{name}, "")
		require.ErrorContains(t, err, "the benchmark measures local, docker", name)
	}
	b, err := benchTable([]string{"local"}, "/nonexistent/python3")
	require.NoError(t, err)
	_, err = b[0].Open(context.Background(), slog.New(slog.DiscardHandler))
	require.Error(t, err, "the row's constructor runs, with the benchmark's python")
}

// TestNoBackendSwitchOutsideTable: no code of the commands compares a backend's
// name with a backend name (`case "docker"`, `f.backend == "swarm"`,
// `exec.Backend() == "none"`, `b.name == "local"`): what differs between backends
// is a field of the backend table.
func TestNoBackendSwitchOutsideTable(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	for _, b := range backends() {
		names[b.name] = true
	}
	root := filepath.Join("..", "..", "cmd")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var subject ast.Expr
			var lits []ast.Expr
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if n.Op == token.EQL || n.Op == token.NEQ {
					subject, lits = n.X, []ast.Expr{n.Y}
				}
			case *ast.SwitchStmt:
				subject = n.Tag
				for _, c := range n.Body.List {
					lits = append(lits, c.(*ast.CaseClause).List...)
				}
			}
			if subject == nil {
				return true
			}
			// What is compared: a backend's name is in something called backend
			// (f.backend, e.Backend()) or in a row's name field (b.name).
			text := string(src[fset.Position(subject.Pos()).Offset:fset.Position(subject.End()).Offset])
			if !strings.Contains(strings.ToLower(text), "backend") && !strings.HasSuffix(text, ".name") {
				return true
			}
			for _, l := range lits {
				if bl, ok := l.(*ast.BasicLit); ok && bl.Kind == token.STRING {
					if s, _ := strconv.Unquote(bl.Value); names[s] {
						t.Errorf("%s: compares a backend's name with %q: make it a field of the backend table", fset.Position(l.Pos()), s)
					}
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
}
