package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernelbox/kernelbox/jupyterapi"
)

// gatewayCollector exports the Jupyter gateway's client counts
// (jupyterapi.Stats) to /metrics, one snapshot per scrape.
type gatewayCollector struct {
	stats                           func() jupyterapi.Stats
	clients, clientsV1, msgs, drops *prometheus.Desc
}

// registerGatewayMetrics adds the gateway's gauges and counters, read from
// stats, to reg.
func registerGatewayMetrics(reg *prometheus.Registry, stats func() jupyterapi.Stats) {
	reg.MustRegister(&gatewayCollector{
		stats: stats,
		clients: prometheus.NewDesc("kernelbox_gateway_clients",
			"Jupyter WebSocket clients connected, by kind: started (a kernel started through /api/kernels) or watching (an agent's session).", []string{"kind"}, nil),
		clientsV1: prometheus.NewDesc("kernelbox_gateway_clients_v1",
			"Jupyter WebSocket clients connected that speak the binary v1.kernel.websocket.jupyter.org subprotocol.", nil, nil),
		msgs: prometheus.NewDesc("kernelbox_gateway_messages_total",
			"Jupyter messages from clients (in, decoded) and to clients (out, written).", []string{"direction"}, nil),
		drops: prometheus.NewDesc("kernelbox_gateway_clients_dropped_total",
			"Jupyter WebSocket clients disconnected by the server, by reason (too_slow, malformed, unsupported, too_big, write_timeout).", []string{"reason"}, nil),
	})
}

func (c *gatewayCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.clients
	ch <- c.clientsV1
	ch <- c.msgs
	ch <- c.drops
}

func (c *gatewayCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(c.clients, prometheus.GaugeValue, float64(s.ClientsStarted), "started")
	ch <- prometheus.MustNewConstMetric(c.clients, prometheus.GaugeValue, float64(s.ClientsWatching), "watching")
	ch <- prometheus.MustNewConstMetric(c.clientsV1, prometheus.GaugeValue, float64(s.ClientsV1))
	ch <- prometheus.MustNewConstMetric(c.msgs, prometheus.CounterValue, float64(s.MessagesIn), "in")
	ch <- prometheus.MustNewConstMetric(c.msgs, prometheus.CounterValue, float64(s.MessagesOut), "out")
	for i, n := range s.Dropped {
		ch <- prometheus.MustNewConstMetric(c.drops, prometheus.CounterValue, float64(n), jupyterapi.DropCause(i).String())
	}
}
