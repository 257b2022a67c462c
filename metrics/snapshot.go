package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernelbox/kernelbox/executor"
)

var _ executor.SnapshotObserver = (*Metrics)(nil)

// snapshotMetrics count hibernation: sessions hibernated now, snapshots written
// and their bytes, and how long saving and restoring took.
type snapshotMetrics struct {
	hibernated       prometheus.Gauge
	taken            prometheus.Counter
	bytes            prometheus.Counter
	saveDur, loadDur prometheus.Histogram
}

// snapshotBuckets span a small namespace (tens of ms) to a few GB.
var snapshotBuckets = []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

func newSnapshotMetrics(ns string) snapshotMetrics {
	return snapshotMetrics{
		hibernated: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "hibernated_sessions",
			Help: "Sessions hibernated now: their variables in a snapshot, no kernel."}),
		taken: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "snapshots_total",
			Help: "Snapshots of a session's variables written (hibernate, fork)."}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "snapshot_bytes_total",
			Help: "Bytes of the snapshots written."}),
		saveDur: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "snapshot_duration_seconds",
			Help: "Time to write a snapshot, in the kernel.", Buckets: snapshotBuckets}),
		loadDur: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "restore_duration_seconds",
			Help: "Time to restore a snapshot, in the kernel (the kernel's start not included).", Buckets: snapshotBuckets}),
	}
}

func (s snapshotMetrics) register(reg *prometheus.Registry) {
	reg.MustRegister(s.hibernated, s.taken, s.bytes, s.saveDur, s.loadDur)
}

// SnapshotTaken implements executor.SnapshotObserver.
func (m *Metrics) SnapshotTaken(bytes int64, d time.Duration) {
	m.snapshots.taken.Inc()
	m.snapshots.bytes.Add(float64(bytes))
	m.snapshots.saveDur.Observe(d.Seconds())
}

// SnapshotRestored implements executor.SnapshotObserver.
func (m *Metrics) SnapshotRestored(d time.Duration) { m.snapshots.loadDur.Observe(d.Seconds()) }

// Hibernated implements executor.SnapshotObserver.
func (m *Metrics) Hibernated(delta int) { m.snapshots.hibernated.Add(float64(delta)) }
