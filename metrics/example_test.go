package metrics_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/metrics"
)

// Example wires Metrics into an executor and a permission engine, and scrapes it.
func Example() {
	m := metrics.New(metrics.Options{NoRuntime: true})
	// In a program:
	//	perm := &permissions.Engine{Policy: ..., OnDecision: m.ObserveDecision}
	//	e, _ := executor.New(executor.Options{..., Permissions: perm, Observer: m})
	//	m.WatchSessions(e.Sessions)
	//	mux.Handle("GET /metrics", m.Handler())
	m.CallFinished(api.StatusOK, 40*time.Millisecond) // what the executor reports after a call

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, "kernelbox_executions_total{") {
			fmt.Println(line)
		}
	}
	// Output:
	// kernelbox_executions_total{status="denied"} 0
	// kernelbox_executions_total{status="error"} 0
	// kernelbox_executions_total{status="kernel_died"} 0
	// kernelbox_executions_total{status="ok"} 1
	// kernelbox_executions_total{status="timeout"} 0
}
