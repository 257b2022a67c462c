package main

import (
	"bytes"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/capacity"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// TestPlanCapacityFlags: on the 23 GiB machine of issue 21, the defaults fit, and
// flags that overcommit are kept but warned about, naming the flags and figures.
func TestPlanCapacityFlags(t *testing.T) {
	t.Parallel()
	const host = 23 << 30
	tests := []struct {
		name     string
		args     []string
		memory   int64
		sessions int
		warn     string
	}{
		{"defaults", nil, 2 << 30, 10, ""},
		{"memory flag", []string{"--memory", "512m"}, 512 << 20, 41, ""},
		{"overcommitting flags", []string{"--max-sessions", "61", "--memory", "2g"}, 2 << 30, 61,
			"--max-sessions 61 x --memory 2.0 GiB = 122.0 GiB promised to sessions, more than the 20.7 GiB budget"},
		{"sessions flag over the default memory", []string{"--max-sessions", "20"}, 2 << 30, 20, "use --max-sessions 10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs, o := serveFlagSet(io.Discard)
			require.NoError(t, fs.Parse(append([]string{"--backend", "docker"}, tt.args...)))
			f := o.engine
			var logs bytes.Buffer
			f.applyPlan(capacity.Make(capacity.Input{
				Memory: host, SessionMemory: int64(f.backends.memory), DefaultSessionMemory: 2 << 30, MaxSessions: f.pool.maxSessions,
			}), slog.New(slog.NewTextHandler(&logs, nil)))
			require.Equal(t, tt.memory, f.backends.sessionMemory)
			require.Equal(t, tt.sessions, f.pool.maxSessions)
			if tt.warn == "" {
				require.NotContains(t, logs.String(), "overcommitted")
				require.LessOrEqual(t, int64(f.pool.maxSessions)*f.backends.sessionMemory, int64(host), "the defaults overcommit")
			} else {
				require.Contains(t, logs.String(), "level=WARN")
				require.Contains(t, logs.String(), tt.warn)
			}
		})
	}
}

func TestSizeFlag(t *testing.T) {
	t.Parallel()
	var s sizeFlag
	require.NoError(t, s.Set("768m"))
	require.Equal(t, sizeFlag(768<<20), s)
	require.NoError(t, s.Set("none"))
	require.Equal(t, sizeFlag(-1), s)
	require.Error(t, s.Set("0"))
	require.Error(t, s.Set("lots"))
}

// TestServeDockerCapacity: serve on docker with an overcommitting --max-sessions
// warns at start, and --memory is each container's limit; with no flags it logs a
// plan that fits.
func TestServeDockerCapacity(t *testing.T) {
	testenv.Docker(t)
	ws, data := testDirs(t)
	cmd, url, log := rawServe(t, "--backend", "docker", "--workspace", ws, "--workdir", data, "--max-sessions", "1000", "--memory", "768m")
	require.Contains(t, log.String(), "--max-sessions 1000 x --memory 768.0 MiB = 750.0 GiB promised to sessions", "no overcommit warning:\n%s", log)
	r, _ := execCLI(t, url, "m1", "1")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	ids := testenv.Containers(t, cmd.Process.Pid)
	require.Len(t, ids, 1)
	out, err := exec.Command("docker", "inspect", "-f", "{{.HostConfig.Memory}} {{.HostConfig.MemorySwap}}", ids[0]).Output()
	require.NoError(t, err)
	require.Equal(t, "805306368 805306368", strings.TrimSpace(string(out)))
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())

	cmd, _, log = rawServe(t, "--backend", "docker", "--workspace", ws, "--workdir", data)
	require.Contains(t, log.String(), "per session (default) x ", "no capacity plan logged:\n%s", log)
	require.NotContains(t, log.String(), "overcommitted", "the defaults overcommit:\n%s", log)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())
}
