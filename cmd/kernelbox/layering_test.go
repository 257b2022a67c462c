package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/local"
	"github.com/kernelbox/kernelbox/backends/remote"
	"github.com/kernelbox/kernelbox/executor"
)

// The packages above the backends know a backend only as an executor.Backend and
// its optional abilities; which backend is which is the backend table's (this
// command's backends.go). These tests keep it so.

// aboveBackends are the packages that serve every backend alike.
var aboveBackends = []string{"executor", "httpapi", "workspace", "mcpserver", "jupyterapi"}

// TestNoBackendNameAboveBackends: no non-test file of the packages above the
// backends holds a string literal that is a backend's name (`"none"`, `"local"`,
// …): what differs between backends is an ability of the backend
// (executor.SpecExplainer, Executor.Disabled, …), not a switch on its name.
// Comments may name backends.
func TestNoBackendNameAboveBackends(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	for _, b := range backends() {
		names[b.name] = true
	}
	root := filepath.Join("..", "..")
	files := 0
	for _, dir := range aboveBackends {
		matches, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		require.NoError(t, err)
		for _, name := range matches {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			files++
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, name, nil, 0)
			require.NoError(t, err)
			ast.Inspect(f, func(n ast.Node) bool {
				if bl, ok := n.(*ast.BasicLit); ok && bl.Kind == token.STRING {
					if s, err := strconv.Unquote(bl.Value); err == nil && names[s] {
						t.Errorf("%s: the string %q names a backend: make what differs an ability of the backend (executor/backend.go)", fset.Position(bl.Pos()), s)
					}
				}
				return true
			})
		}
	}
	require.Greater(t, files, 100, "the packages above the backends were not found from %s", root)
}

// testKit is where the packages that exist for tests only live: they wire real
// backends for tests, so they may import them; no production package may import
// them. The sandbox's own test helpers (backends/internal/sandbox/sandboxtest) sit
// beside what they test, inside the backends.
const testKit = "github.com/kernelbox/kernelbox/internal/testkit/"

// TestNoBackendBelowCommands: `go list -deps` of every production package that is
// not a command (package main) and not a backend contains no backend package, and
// no production package imports the test kit (which does wire backends); the
// tests of the packages above the backends import none either. So a
// library user who imports the executor, the HTTP API or any internal helper they
// use gets no backend they did not choose, and only the commands choose.
func TestNoBackendBelowCommands(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goTool, "list", "-e", "-f", "{{.Name}} {{.ImportPath}}{{range .Deps}} {{.}}{{end}}", "./...")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	const module = "github.com/kernelbox/kernelbox/"
	isBackend := func(p string) bool { return strings.HasPrefix(p, module+"backends/") }
	isKit := func(p string) bool {
		return strings.HasPrefix(p, testKit) || strings.HasPrefix(p, module) && path.Base(p) == "sandboxtest"
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		require.GreaterOrEqual(t, len(f), 2, line)
		name, pkg, deps := f[0], f[1], f[2:]
		if isKit(pkg) {
			continue
		}
		for _, d := range deps {
			if isKit(d) {
				t.Errorf("%s imports the test kit's %s", pkg, d)
			}
		}
		if name == "main" || isBackend(pkg) {
			continue
		}
		checked++
		for _, d := range deps {
			if isBackend(d) {
				t.Errorf("%s depends on the backend package %s: only commands (cmd/, examples/) choose backends", pkg, d)
			}
		}
	}
	require.Greater(t, checked, 20, "too few packages listed:\n%s", out)

	// The tests of the packages above the backends reach real backends only
	// through the test kit (internal/testkit/testexec), never by importing one.
	args := []string{"list", "-f", "{{.ImportPath}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}"}
	for _, dir := range append(aboveBackends, "client", "notebook") {
		args = append(args, "./"+dir)
	}
	cmd = exec.Command(goTool, args...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Stderr = os.Stderr
	out, err = cmd.Output()
	require.NoError(t, err, "go list")
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, d := range f[1:] {
			if isBackend(d) {
				t.Errorf("the tests of %s import the backend package %s: reach it through internal/testkit/testexec", f[0], d)
			}
		}
	}
}

// TestBackendsExplainRefusals: the backends that cannot confine a kernel's
// network say why (executor.SpecExplainer), which the executor puts in the error
// refusing a template's allowlist; a field their not applying says enough about
// gets no reason.
func TestBackendsExplainRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		b    executor.SpecExplainer
		want string
	}{
		{new(local.Backend), "a local kernel is not confined"},
		{new(remote.Backend), "kernelbox has no say over a gateway's network"},
	} {
		require.Contains(t, c.b.WhyNot("network"), c.want)
		require.Empty(t, c.b.WhyNot("memory"))
	}
	require.Contains(t, new(local.Backend).WhyNot("secrets"), "could read kernelbox's memory")
}
