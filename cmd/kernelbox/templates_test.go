package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// A templates file asking more than the server's flags give a session is refused
// when serve (or mcp) loads it: the command exits with the file, the template, the
// field, what it asked and the cap, before any backend starts (no container is
// made); a field the backend cannot apply is refused as the executor is built.
func TestTemplatesRefusedAtLoad(t *testing.T) {
	py := testenv.Jupyter(t)
	bin := kernelboxBin(t)
	tests := []struct {
		name  string
		doc   string
		flags []string
		want  []string
	}{
		{"memory over --memory", `{"templates": [{"name": "big", "memory": "1g"}]}`,
			[]string{"serve", "--backend", "docker", "--memory", "512m"},
			[]string{`--templates: templates `, `template "big": memory: asks 1.0 GiB, over the server's cap of 512.0 MiB (--memory)`}},
		{"cpus over docker's", `{"templates": [{"name": "wide", "cpus": 4}]}`,
			[]string{"mcp", "--backend", "docker"},
			[]string{`template "wide": cpus: asks 4, over the server's cap of 2`}},
		{"idle over --idle-timeout", `{"templates": [{"name": "lazy", "idle_timeout": "2h"}]}`,
			[]string{"serve", "--backend", "local", "--python", py, "--idle-timeout", "30m"},
			[]string{`template "lazy": idle_timeout: asks 2h0m0s, over the server's cap of 30m0s (--idle-timeout)`}},
		{"a limit local cannot apply", `{"templates": [{"name": "small", "memory": "256m"}]}`,
			[]string{"serve", "--backend", "local", "--python", py},
			[]string{`template "small": field memory: the local backend cannot apply it`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.flags[2] == "docker" {
				testenv.Docker(t)
			}
			ws, data := testDirs(t)
			file := filepath.Join(t.TempDir(), "templates.json")
			require.NoError(t, os.WriteFile(file, []byte(tt.doc), 0o600))
			args := append(append([]string{}, tt.flags...), "--workspace", ws, "--workdir", data, "--templates", file)
			if tt.flags[0] == "serve" {
				args = append(args, "--listen", "127.0.0.1:0")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Stdin = nil // mcp serves stdio: an empty stdin would end it, not an error
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%s exited %v:\n%s", tt.flags[0], err, out)
			require.NotEqual(t, 0, ee.ExitCode())
			for _, w := range tt.want {
				require.Contains(t, string(out), w)
			}
			if tt.name != "a limit local cannot apply" {
				require.Contains(t, string(out), file, "a load error names the file")
			}
			require.Empty(t, testenv.Containers(t, cmd.Process.Pid), "no container was made")
		})
	}
}
