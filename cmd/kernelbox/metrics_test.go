package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricsHTTPAPI checks that a call through the HTTP API moves the counters at
// /metrics of `kernelbox serve`.
func TestMetricsHTTPAPI(t *testing.T) {
	s := startServe(t)
	status, before := s.get(t, "/metrics", true)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, 0.0, metric(before, `kernelbox_executions_total{status="ok"}`))

	body, _ := json.Marshal(map[string]any{"code": "open('outputs/a.txt', 'w').write('hello')"})
	req, err := http.NewRequest(http.MethodPost, s.URL+"/v1/sessions/m1/execute", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	_, after := s.get(t, "/metrics", true)
	assert.Equal(t, 1.0, metric(after, `kernelbox_executions_total{status="ok"}`))
	assert.Equal(t, 1.0, metric(after, `kernelbox_execution_duration_seconds_count{status="ok"}`))
	assert.GreaterOrEqual(t, metric(after, `kernelbox_kernel_starts_total`), 1.0)
	assert.Equal(t, 1.0, metric(after, `kernelbox_artifacts_total`))
	assert.Equal(t, 5.0, metric(after, `kernelbox_artifact_bytes_total`))
	assert.Equal(t, 1.0, metric(after, `kernelbox_sessions{state="idle"}`))
	assert.Contains(t, after, "go_goroutines", "runtime collectors are included")
}

// metric returns the value of one series in a Prometheus text exposition, or 0.
func metric(exposition, series string) float64 {
	for _, line := range strings.Split(exposition, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return 0
}
