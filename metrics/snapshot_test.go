package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/metrics"
)

// TestSnapshotMetrics: what the executor reports of hibernation is counted.
func TestSnapshotMetrics(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	m.Hibernated(1)
	m.Hibernated(1)
	m.Hibernated(-1)
	m.SnapshotTaken(1000, 200*time.Millisecond)
	m.SnapshotTaken(500, time.Second)
	m.SnapshotRestored(300 * time.Millisecond)
	want := `
# HELP kernelbox_hibernated_sessions Sessions hibernated now: their variables in a snapshot, no kernel.
# TYPE kernelbox_hibernated_sessions gauge
kernelbox_hibernated_sessions 1
# HELP kernelbox_snapshot_bytes_total Bytes of the snapshots written.
# TYPE kernelbox_snapshot_bytes_total counter
kernelbox_snapshot_bytes_total 1500
# HELP kernelbox_snapshots_total Snapshots of a session's variables written (hibernate, fork).
# TYPE kernelbox_snapshots_total counter
kernelbox_snapshots_total 2
`
	require.NoError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"kernelbox_hibernated_sessions", "kernelbox_snapshot_bytes_total", "kernelbox_snapshots_total"))
	require.Equal(t, 2, testutil.CollectAndCount(m.Registry(), "kernelbox_snapshot_duration_seconds", "kernelbox_restore_duration_seconds"))
}
