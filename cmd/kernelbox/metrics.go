package main

import (
	"net/http"

	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/metrics"
)

// newMetrics returns the metrics every engine collects; engineFlags.build wires them
// into the executor (Observer) and the permission engine (OnDecision).
func newMetrics() *metrics.Metrics {
	return metrics.New(metrics.Options{})
}

// mountMetrics serves the Prometheus metrics at GET /metrics, behind the same bearer
// token as the HTTP API (scrape with `authorization: {credentials: TOKEN}`).
func mountMetrics(mux *http.ServeMux, en *engine, token string) {
	mux.Handle("GET /metrics", httpapi.RequireToken(token, en.metrics.Handler()))
}
