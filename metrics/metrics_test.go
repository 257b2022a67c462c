package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/metrics"
	"github.com/kernelbox/kernelbox/permissions"
)

// TestObserver feeds the observer methods and compares what a scrape shows.
func TestObserver(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{NoRuntime: true})
	m.CallFinished(api.StatusOK, 20*time.Millisecond)
	m.CallFinished(api.StatusOK, 3*time.Second)
	m.CallFinished(api.StatusTimeout, 10*time.Second)
	m.KernelStarted()
	m.KernelStarted()
	m.KernelDied()
	m.ArtifactsCollected(2, 1500)
	m.ArtifactsCollected(1, 500)
	m.ObserveDecision(permissions.Decision{Capability: permissions.ResolvedCapability{Name: permissions.FilesystemRead}, Effect: permissions.Deny})
	m.ObserveDecision(permissions.Decision{Capability: permissions.ResolvedCapability{Name: permissions.PythonExecStateful}, Effect: permissions.Allow})
	m.WatchSessions(func() []api.SessionInfo {
		return []api.SessionInfo{{ID: "a", State: "idle"}, {ID: "b", State: "idle"}, {ID: "c", State: "busy"}}
	})

	want := `
# HELP kernelbox_executions_total Calls that ran or were denied, by final status (ok, error, timeout, kernel_died, denied).
# TYPE kernelbox_executions_total counter
kernelbox_executions_total{status="denied"} 0
kernelbox_executions_total{status="error"} 0
kernelbox_executions_total{status="kernel_died"} 0
kernelbox_executions_total{status="ok"} 2
kernelbox_executions_total{status="timeout"} 1
# HELP kernelbox_kernel_starts_total Kernels started, for sessions and for the warm pool.
# TYPE kernelbox_kernel_starts_total counter
kernelbox_kernel_starts_total 2
# HELP kernelbox_kernel_deaths_total Kernels that died (or whose server or container went away) during a call.
# TYPE kernelbox_kernel_deaths_total counter
kernelbox_kernel_deaths_total 1
# HELP kernelbox_artifacts_total Artifacts collected: files new or changed in outputs/ and saved rich outputs.
# TYPE kernelbox_artifacts_total counter
kernelbox_artifacts_total 3
# HELP kernelbox_artifact_bytes_total Bytes of the artifacts collected.
# TYPE kernelbox_artifact_bytes_total counter
kernelbox_artifact_bytes_total 2000
# HELP kernelbox_permission_decisions_total Permission decisions by capability and effect (allow or deny; asks are counted as settled).
# TYPE kernelbox_permission_decisions_total counter
kernelbox_permission_decisions_total{capability="filesystem.read",effect="deny"} 1
kernelbox_permission_decisions_total{capability="python.exec.stateful",effect="allow"} 1
# HELP kernelbox_sessions Sessions by state (new, starting, idle, busy, dead, hibernated, restoring), read at scrape time.
# TYPE kernelbox_sessions gauge
kernelbox_sessions{state="busy"} 1
kernelbox_sessions{state="dead"} 0
kernelbox_sessions{state="hibernated"} 0
kernelbox_sessions{state="idle"} 2
kernelbox_sessions{state="new"} 0
kernelbox_sessions{state="restoring"} 0
kernelbox_sessions{state="starting"} 0
`
	require.NoError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"kernelbox_executions_total", "kernelbox_kernel_starts_total", "kernelbox_kernel_deaths_total",
		"kernelbox_artifacts_total", "kernelbox_artifact_bytes_total",
		"kernelbox_permission_decisions_total", "kernelbox_sessions"))

	n, err := testutil.GatherAndCount(m.Registry(), "kernelbox_execution_duration_seconds")
	require.NoError(t, err)
	require.Equal(t, 2, n, "one histogram per status seen")

	problems, err := testutil.GatherAndLint(m.Registry())
	require.NoError(t, err)
	require.Empty(t, problems)
}

// TestSessionsUnwatched reports every state as zero before WatchSessions.
func TestSessionsUnwatched(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{NoRuntime: true})
	n, err := testutil.GatherAndCount(m.Registry(), "kernelbox_sessions")
	require.NoError(t, err)
	require.Equal(t, 7, n)
}

// TestHandler serves the text format, runtime collectors included, and keeps
// registries separate.
func TestHandler(t *testing.T) {
	t.Parallel()
	a, b := metrics.New(metrics.Options{}), metrics.New(metrics.Options{})
	a.KernelStarted()
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "kernelbox_kernel_starts_total 1")
	require.Contains(t, string(body), "go_goroutines")
	require.Contains(t, string(body), "process_")
	require.NoError(t, testutil.GatherAndCompare(b.Registry(), strings.NewReader(`
# HELP kernelbox_kernel_starts_total Kernels started, for sessions and for the warm pool.
# TYPE kernelbox_kernel_starts_total counter
kernelbox_kernel_starts_total 0
`), "kernelbox_kernel_starts_total"), "a second Metrics has its own counters")
}

// Egress connections reported by calls are counted by decision, bytes by direction.
func TestNetworkReported(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{NoRuntime: true})
	m.NetworkReported(executor.NetworkReport{Allowed: 2, Refused: 1, Up: 300, Down: 4000})
	m.NetworkReported(executor.NetworkReport{Refused: 2})
	want := `
# HELP kernelbox_egress_connections_total Connections of sessions with a network allowlist through kernelbox's egress proxy, by decision (allow, deny), counted when a call reports them.
# TYPE kernelbox_egress_connections_total counter
kernelbox_egress_connections_total{decision="allow"} 2
kernelbox_egress_connections_total{decision="deny"} 3
# HELP kernelbox_egress_bytes_total Bytes carried by the egress proxy, by direction (up: kernel to server, down: server to kernel).
# TYPE kernelbox_egress_bytes_total counter
kernelbox_egress_bytes_total{direction="down"} 4000
kernelbox_egress_bytes_total{direction="up"} 300
`
	require.NoError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "kernelbox_egress_connections_total", "kernelbox_egress_bytes_total"))
}
