package main

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/jupyterapi"
)

// TestGatewayMetrics: the gateway's Stats as /metrics shows them, every drop
// reason present (zero or not).
func TestGatewayMetrics(t *testing.T) {
	t.Parallel()
	s := jupyterapi.Stats{ClientsStarted: 2, ClientsWatching: 1, ClientsV1: 1, MessagesIn: 7, MessagesOut: 40}
	s.Dropped[jupyterapi.DropTooSlow], s.Dropped[jupyterapi.DropMalformed] = 3, 1
	reg := prometheus.NewRegistry()
	registerGatewayMetrics(reg, func() jupyterapi.Stats { return s })
	want := `
# HELP kernelbox_gateway_clients_dropped_total Jupyter WebSocket clients disconnected by the server, by reason (too_slow, malformed, unsupported, too_big, write_timeout).
# TYPE kernelbox_gateway_clients_dropped_total counter
kernelbox_gateway_clients_dropped_total{reason="malformed"} 1
kernelbox_gateway_clients_dropped_total{reason="too_big"} 0
kernelbox_gateway_clients_dropped_total{reason="too_slow"} 3
kernelbox_gateway_clients_dropped_total{reason="unsupported"} 0
kernelbox_gateway_clients_dropped_total{reason="write_timeout"} 0
# HELP kernelbox_gateway_clients Jupyter WebSocket clients connected, by kind: started (a kernel started through /api/kernels) or watching (an agent's session).
# TYPE kernelbox_gateway_clients gauge
kernelbox_gateway_clients{kind="started"} 2
kernelbox_gateway_clients{kind="watching"} 1
# HELP kernelbox_gateway_clients_v1 Jupyter WebSocket clients connected that speak the binary v1.kernel.websocket.jupyter.org subprotocol.
# TYPE kernelbox_gateway_clients_v1 gauge
kernelbox_gateway_clients_v1 1
# HELP kernelbox_gateway_messages_total Jupyter messages from clients (in, decoded) and to clients (out, written).
# TYPE kernelbox_gateway_messages_total counter
kernelbox_gateway_messages_total{direction="in"} 7
kernelbox_gateway_messages_total{direction="out"} 40
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want)))
}
