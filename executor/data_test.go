package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// TestDataMountLocal: a data mount on the local backend (which cannot mount) is
// copied into every session at data/<name> with read-only modes (root ignores them),
// and nothing a session does to its copy reaches the host directory.
func TestDataMountLocal(t *testing.T) {
	e := newEnv(t, func(o *executor.Options) {
		ref := filepath.Join(o.Permissions.Vars.Workdir, "ref")
		require.NoError(t, os.MkdirAll(filepath.Join(ref, "sub"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(ref, "sub", "table.csv"), []byte("a,b\n1,2\n"), 0o644))
		o.Data = []executor.DataMount{{Name: "ref", HostDir: ref}}
	})
	for _, session := range []string{"one", "two"} {
		r := e.run(t, session, `print(open("data/ref/sub/table.csv").read().splitlines()[1])
try:
    open("data/ref/sub/table.csv", "w").write("x")
    print("WROTE")
except OSError as err:
    print("refused", type(err).__name__)`)
		require.Equal(t, api.StatusOK, r.Status, r.Stderr)
		require.Contains(t, r.Stdout, "1,2")
		if os.Geteuid() != 0 { // root ignores file modes
			require.Contains(t, r.Stdout, "refused PermissionError")
		}
	}
	got, err := os.ReadFile(filepath.Join(e.Data, "ref", "sub", "table.csv"))
	require.NoError(t, err)
	require.Equal(t, "a,b\n1,2\n", string(got), "the host directory must be untouched")
}

// TestDataMountRefused: data mounts are checked when the executor is built: bad
// names, missing directories and directories the policy denies fail New.
func TestDataMountRefused(t *testing.T) {
	root := t.TempDir()
	work, home := filepath.Join(root, "work"), filepath.Join(root, "home")
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	require.NoError(t, os.MkdirAll(filepath.Join(work, "ok"), 0o755))
	cases := []struct {
		name  string
		mount executor.DataMount
		want  string
	}{
		{"dotdot name", executor.DataMount{Name: "..", HostDir: filepath.Join(work, "ok")}, "plain directory name"},
		{"nested name", executor.DataMount{Name: "a/b", HostDir: filepath.Join(work, "ok")}, "plain directory name"},
		{"NUL in the name", executor.DataMount{Name: "a\x00b", HostDir: filepath.Join(work, "ok")}, "plain directory name"},
		{"over-long name", executor.DataMount{Name: strings.Repeat("n", 256), HostDir: filepath.Join(work, "ok")}, "plain directory name"},
		{"secret dir", executor.DataMount{Name: "keys", HostDir: filepath.Join(home, ".ssh")}, "denied"},
		{"outside policy", executor.DataMount{Name: "etc", HostDir: "/etc"}, "denied"},
		{"missing", executor.DataMount{Name: "gone", HostDir: filepath.Join(work, "gone")}, "gone"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := testexec.LocalWith(t, testexec.Real{}).Backend
			defer b.Close(context.Background())
			ws, err := workspace.New(workspace.Options{Root: t.TempDir()})
			require.NoError(t, err)
			defer ws.Close()
			e, err := executor.New(executor.Options{
				Backend: b, Workspace: ws,
				Permissions: &permissions.Engine{
					Policy: permissions.DefaultPolicy(),
					Vars:   permissions.Vars{Workdir: work, Home: home, Artifacts: ws.ArtifactsDir()},
				},
				Data: []executor.DataMount{c.mount},
			})
			if err == nil {
				e.Close()
				t.Fatalf("New accepted data mount %+v", c.mount)
			}
			require.True(t, strings.Contains(err.Error(), c.want), "error %q should mention %q", err, c.want)
		})
	}
}
