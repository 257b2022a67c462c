package main

import (
	"github.com/kernelbox/kernelbox/metrics"
)

// newMetrics returns the metrics every engine collects; engineFlags.build wires them
// into the executor (Observer) and the permission engine (OnDecision).
func newMetrics() *metrics.Metrics {
	return metrics.New(metrics.Options{})
}
